import { ModelWorker, type ModelThreads } from '../../adapters/model-threads/model-worker.js';
import type { ModelProfile } from '../../adapters/models/profile.js';
import type { RuntimeOptions } from '../../adapters/runtime/runtime-options.js';

/**
 * Starts a model's session and measures what it costs this process: the RSS growth from just
 * before the session starts to after its batch budget is tuned. The pool charges a model
 * max(predicted, measured) from this; it calls it inside an exclusive section, so no other load or
 * eviction moves RSS meanwhile. Apart from pool.ts, which decides what to charge and what to evict.
 */

export interface MeasuredSession {
  worker: ModelWorker;
  /** The session's own load time, as the model thread reports it. */
  loadMs: number;
  /** The tuned batch budget (maxBatchTokens 'auto'), else null. */
  batchTokens: number | null;
  /** RSS growth of the process over the start and tuning, never negative. */
  measuredBytes: number;
  /** performance.now() when the session began to start (for the load's duration). */
  startedAt: number;
}

function rss(): number {
  return process.memoryUsage.rss();
}

/** Starts the session (on a thread from `threads` when given) and tunes it; closes it if tuning fails. */
export async function startMeasuredSession(
  profile: ModelProfile,
  runtime: RuntimeOptions,
  threads: ModelThreads | undefined,
  tune: ((worker: ModelWorker) => Promise<number | null>) | undefined,
): Promise<MeasuredSession> {
  // The thread is taken before RSS is sampled: a spare still importing its modules is not
  // charged to the model.
  const thread = await threads?.take(profile.id, runtime.nice);
  const before = rss();
  const startedAt = performance.now();
  const { worker, loadMs } = await ModelWorker.start(profile, runtime, thread, threads?.recycler(runtime.nice));
  let batchTokens: number | null = null;
  try {
    batchTokens = (await tune?.(worker)) ?? null;
  } catch (error) {
    await worker.close();
    throw error;
  }
  const measuredBytes = Math.max(0, rss() - before);
  return { worker, loadMs, batchTokens, measuredBytes, startedAt };
}
