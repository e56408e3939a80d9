import type { Priority } from '../../adapters/protocol/requests.js';
import type { ShoalError } from '../../adapters/protocol/errors.js';

/**
 * What the scheduler is configured with and what it reports: its options and their defaults, and
 * the event of each batch its hooks receive. Apart from scheduler.ts so the settings table, the
 * engine's options, telemetry and the benches read them without importing the scheduler itself.
 */

export interface SchedulerOptions {
  maxBatchTokens: number;
  maxBatchItems: number;
  /** Longest wait for more items to fill a bulk batch while its model still has items in preparation. */
  maxWaitMs: number;
  /** Bulk/primary batches running at once over all models (1 on CPU: a batch already uses every core). */
  maxConcurrentBatches: number;
  /** Items waiting over all models before bulk submitters must wait. */
  maxQueuedItems: number;
  maxPadRatio: number;
  padSlackTokens: number;
  /** A waiting item older than this anchors the next batch of its model. */
  maxItemWaitMs: number;
  /** Adapt each model's token budget so a bulk batch takes about this long; null = fixed budget. */
  targetBatchMs: number | null;
  hooks?: SchedulerHooks | undefined;
}

export const DEFAULT_SCHEDULER_OPTIONS: SchedulerOptions = Object.freeze({
  // 1,024: best or within a few percent of best fp32 ceiling on every machine measured, and
  // without the CPU arena (workers) 2,048-token batches lost 15-35 % to fresh memory mappings
  // (README, CPU arena; bench/throughput.ts).
  maxBatchTokens: 1024,
  maxBatchItems: 256,
  maxWaitMs: 2,
  maxConcurrentBatches: 1,
  maxQueuedItems: 50_000,
  maxPadRatio: 0.25,
  padSlackTokens: 8,
  maxItemWaitMs: 2_000,
  targetBatchMs: null,
});

export interface BatchEvent {
  model: string;
  lane: Priority;
  /** The session that ran it: the model's primary one, or its interactive one. */
  session: 'primary' | 'interactive';
  items: number;
  realTokens: number;
  paddedTokens: number;
  runMs: number;
  /** Longest time an item of the batch waited in the queue. */
  queueMs: number;
  error?: ShoalError;
}

export interface SchedulerHooks {
  onBatch?(event: BatchEvent): void;
}
