import type { ModelProfile } from '../../adapters/models/profile.js';
import type { LoadedModel } from './loaded-model.js';

/**
 * A model's batch token budget: where it starts (the budget tuned on this machine, else the
 * catalog's maxBatchTokens for the model, else the scheduler's) and how `targetBatchMs` moves it
 * after each bulk batch. Pure arithmetic, apart from the scheduler so it can be tested alone.
 */

/** Smallest budget the adaptation goes down to. */
const MIN_ADAPTED_BUDGET = 256;

/** What a model's starting budget depends on: its tuned budget and its catalog options. */
export type BudgetSource = Pick<LoadedModel, 'batchTokens'> & { readonly profile: Pick<ModelProfile, 'options'> };

/** The budget a model starts with, and the ceiling of its adapted budget. */
export function initialBudget(model: BudgetSource, defaultTokens: number): number {
  if (model.batchTokens !== null) return model.batchTokens;
  const override = model.profile.options.maxBatchTokens;
  return typeof override === 'number' && override > 0 ? override : defaultTokens;
}

/**
 * The budget after a batch of `paddedTokens` took `runMs`, moved toward the budget that would take
 * `targetBatchMs`, between MIN_ADAPTED_BUDGET and `ceiling`; unchanged without a target or a timing.
 */
export function adaptedBudget(budget: number, ceiling: number, paddedTokens: number, runMs: number, targetBatchMs: number | null): number {
  if (targetBatchMs === null || runMs <= 0 || paddedTokens <= 0) return budget;
  const wanted = (paddedTokens / runMs) * targetBatchMs;
  // Exponential smoothing: 70 % the budget so far, 30 % what the last batch asks for.
  const next = 0.7 * budget + 0.3 * wanted;
  return Math.round(Math.min(ceiling, Math.max(MIN_ADAPTED_BUDGET, next)));
}
