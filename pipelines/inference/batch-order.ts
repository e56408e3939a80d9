import type { LoadedModel } from './loaded-model.js';
import type { ModelWorkQueue } from './work-queue.js';

/**
 * Which model's bulk batch may start next, and when: fair share between models (least served
 * tokens first), the concurrent-batch slots, one batch queued ahead on a primary session, recent
 * interactive traffic holding bulk work back, and the short wait that lets a bulk batch fill up.
 * Decisions only, over the scheduler's per-model state: the scheduler starts the batches and owns
 * the timers.
 */

/** The scheduler's state of one model: its queue and what it has in flight. */
export interface ModelState<T> {
  name: string;
  model: LoadedModel;
  queue: ModelWorkQueue<T>;
  /** Batches sent to the primary session and not finished (one running, at most one queued behind it). */
  primaryInFlight: number;
  /** When an interactive item of this model last arrived (epoch ms). */
  lastInteractiveAt: number;
  interactiveBusy: boolean;
  /** Virtual time for fair share: tokens served, normalized. */
  served: number;
  /** Requests of this model whose items are still being prepared. */
  preparing: number;
  /** Adapted token budget (targetBatchMs). */
  budget: number;
  timer: NodeJS.Timeout | null;
}

/** The limits these decisions read from the scheduler's options. */
export interface OrderLimits {
  /** Bulk/primary batches running at once over all models. */
  maxConcurrentBatches: number;
  /** Longest wait for a bulk batch to fill while its model still has items in preparation. */
  maxWaitMs: number;
}

/** Batches a primary session may hold: the running one and one queued behind it. */
export const PIPELINE_DEPTH = 2;
/** Interactive traffic this recent on a model without an interactive session disables queuing ahead. */
export const INTERACTIVE_RECENT_MS = 10_000;

/** Models whose primary session has batches in flight: each holds one of the concurrent slots. */
export function busyWorkers<T>(states: Iterable<ModelState<T>>): number {
  let busy = 0;
  for (const state of states) if (state.primaryInFlight > 0) busy++;
  return busy;
}

/** The fair-share level: the least served tokens among models with bulk work waiting (0 if none). */
export function minServed<T>(states: Iterable<ModelState<T>>): number {
  let min: number | null = null;
  for (const state of states) {
    if (state.queue.bulkSize > 0 && (min === null || state.served < min)) min = state.served;
  }
  return min ?? 0;
}

/**
 * Whether an interactive batch may run on the model's primary session: it is idle, a concurrent
 * slot is free, and — when the model has an interactive session (then busy with the batch before)
 * — no bulk work of the model is waiting or being prepared. So queries that pile up (a search
 * gateway under concurrent clients) run two batches at once, one per session, and use the cores
 * the interactive session leaves idle (it has half of them); a lone query keeps the interactive
 * session, whose threads run at normal OS priority (the primary's run at `bulkNice`).
 */
export function primaryFreeForQueries<T>(state: ModelState<T>, states: Iterable<ModelState<T>>, limits: OrderLimits): boolean {
  if (state.primaryInFlight > 0 || busyWorkers(states) >= limits.maxConcurrentBatches) return false;
  return state.model.interactive === null || (state.queue.bulkSize === 0 && state.preparing === 0);
}

/**
 * A bulk batch may start on an idle primary session if a slot is free, or be queued one batch
 * ahead of the running one (so the model thread never waits for the next batch) — unless the
 * model serves recent interactive traffic on its primary session, which must then wait behind at
 * most the batch already running.
 */
export function canStartBulk<T>(state: ModelState<T>, states: Iterable<ModelState<T>>, now: number, limits: OrderLimits): boolean {
  if (state.primaryInFlight === 0) return busyWorkers(states) < limits.maxConcurrentBatches;
  const interactiveOnPrimary = state.model.interactive === null && now - state.lastInteractiveAt < INTERACTIVE_RECENT_MS;
  return !interactiveOnPrimary && state.primaryInFlight < PIPELINE_DEPTH;
}

/**
 * How much longer a bulk batch of this model should wait to fill up: 0 when it should go now (no
 * items in preparation, a full budget waiting, or its oldest item waited maxWaitMs already).
 */
export function bulkFillWaitMs<T>(state: ModelState<T>, now: number, limits: OrderLimits): number {
  if (state.preparing === 0 || limits.maxWaitMs <= 0) return 0;
  if (state.queue.bulkTokens() >= state.budget) return 0;
  const oldest = state.queue.oldestBulk();
  const waited = oldest === undefined ? 0 : now - oldest.enqueuedAt;
  if (waited >= limits.maxWaitMs) return 0;
  return limits.maxWaitMs - waited;
}

/**
 * The least-served model whose bulk work may start now (interactive work of a model blocks its
 * bulk). `ready` is asked last, only of models that pass every other rule, in order: the scheduler
 * arms its fill-up timer there.
 */
export function nextBulkModel<T>(states: ReadonlyMap<string, ModelState<T>>, now: number, limits: OrderLimits, ready: (state: ModelState<T>) => boolean): ModelState<T> | null {
  let best: ModelState<T> | null = null;
  // A model waiting for a slot keeps running models from queuing ahead (fair share first).
  let waiting = false;
  for (const state of states.values()) {
    if (state.queue.bulkSize > 0 && state.primaryInFlight === 0) waiting = true;
  }
  for (const state of states.values()) {
    if (state.queue.bulkSize === 0 || !canStartBulk(state, states.values(), now, limits)) continue;
    if (waiting && state.primaryInFlight > 0) continue;
    if (state.queue.interactiveSize > 0 && state.model.interactive === null) continue;
    if (!ready(state)) continue;
    if (best === null || state.served < best.served) best = state;
  }
  return best;
}
