import { ErrorCode, ShoalError } from '../protocol/errors.js';
import type { PreparedText, Runner } from '../models/family.js';
import type { ModelProfile } from '../models/profile.js';

/**
 * Measures which batch token budget runs a model fastest on this machine (model thread side).
 * The family's own runner is timed on synthetic text batches — full batches of `length`-token
 * items at each candidate budget — so the figure includes collation and post-processing exactly
 * as real traffic pays them. The optimum depends on the CPU's caches and the model's width: on the
 * project's CPU a 2,048-token budget beat 8,192 by about 35 % for MiniLM.
 */

/** Families whose inputs are plain token sequences (synthetic ids are valid for them). */
const TUNABLE = new Set(['dense', 'cross-encoder', 'splade', 'colbert']);

export interface TuningPoint {
  budget: number;
  /** Tokens per item of the trial batches. */
  length: number;
  tokensPerSecond: number;
}

export function isTunable(profile: ModelProfile): boolean {
  return TUNABLE.has(profile.family) && profile.tokenizer !== null;
}

function syntheticItem(profile: ModelProfile, length: number, seed: number): PreparedText {
  const vocab = profile.dims.vocab ?? 1000;
  const low = Math.min(1000, Math.floor(vocab / 4));
  const high = Math.max(low + 1, Math.floor(vocab * 0.9));
  const ids: number[] = [];
  let state = 48_271 + seed;
  for (let i = 0; i < length; i++) {
    state = (state * 48_271) % 2_147_483_647;
    ids.push(low + (state % (high - low)));
  }
  return { kind: 'text', ids, typeIds: null, attention: null, truncated: false, length, promptTokens: 0, role: 'document' };
}

/** Median-of-rounds tokens/s of the runner at each budget, for items of `length` tokens. */
export async function measureBudgets(runner: Runner, profile: ModelProfile, budgets: readonly number[], length: number, rounds: number): Promise<TuningPoint[]> {
  if (!isTunable(profile)) {
    throw new ShoalError(ErrorCode.UNSUPPORTED_OPERATION, `batch tuning needs a plain text model; ${profile.id} is ${profile.family}`);
  }
  const seq = Math.max(2, Math.min(length, profile.maxLength));
  const points: TuningPoint[] = [];
  for (const budget of budgets) {
    const rows = Math.max(1, Math.floor(budget / seq));
    const batch = Array.from({ length: rows }, (_, i) => syntheticItem(profile, seq, i));
    await runner.run(batch, { outputs: [] });
    const times: number[] = [];
    for (let r = 0; r < rounds; r++) {
      const started = performance.now();
      await runner.run(batch, { outputs: [] });
      times.push(performance.now() - started);
    }
    times.sort((a, b) => a - b);
    const median = times[Math.floor(times.length / 2)] ?? Number.POSITIVE_INFINITY;
    points.push({ budget, length: seq, tokensPerSecond: (rows * seq) / (median / 1000) });
  }
  return points;
}
