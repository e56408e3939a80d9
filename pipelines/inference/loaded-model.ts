import type { ModelWorker } from '../../adapters/model-threads/model-worker.js';
import type { ModelProfile } from '../../adapters/models/profile.js';

/**
 * What a user of the pool holds: a loaded model (its sessions and what its load measured) and the
 * lease that keeps it resident. Apart from pool.ts so the scheduler and chunked runs, which only
 * use models, do not depend on how the pool loads and evicts them.
 */

export interface LoadedModel {
  readonly name: string;
  readonly profile: ModelProfile;
  readonly worker: ModelWorker;
  /** Optional second session reserved for the interactive lane (see ModelPool.ensureInteractive). */
  interactive: ModelWorker | null;
  readonly loadedAt: number;
  readonly loadMs: number;
  readonly predictedBytes: number;
  readonly measuredBytes: number;
  /** Batch token budget measured for this model on this machine (maxBatchTokens 'auto'), else null. */
  readonly batchTokens: number | null;
}

export interface ModelLease {
  readonly model: LoadedModel;
  /** Idempotent. */
  release(): void;
}
