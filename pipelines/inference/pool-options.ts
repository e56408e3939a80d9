import type { ShoalError } from '../../adapters/protocol/errors.js';
import type { RuntimeOptions } from '../../adapters/runtime/runtime-options.js';
import type { ModelThreads, ModelWorker } from '../../adapters/model-threads/model-worker.js';
import type { ModelProfile } from '../../adapters/models/profile.js';

/**
 * What the model pool is configured with and what it reports: its options, the hooks it calls on
 * loads and evictions, and the snapshot of residency they and the metrics read. Apart from pool.ts
 * so the engine's options, telemetry and the worker name these types without the pool itself.
 */

export type EvictionReason = 'capacity' | 'idle' | 'explicit' | 'shutdown';

export interface ResidentModel {
  name: string;
  family: string | null;
  state: 'loading' | 'ready';
  chargedBytes: number;
  predictedBytes: number | null;
  measuredBytes: number | null;
  lastUsed: number;
  inFlight: number;
  pinned: boolean;
  interactive: boolean;
}

export interface PoolSnapshot {
  budgetBytes: number;
  residentBytes: number;
  pinnedCount: number;
  models: ResidentModel[];
}

export interface PoolHooks {
  onLoad?(event: { name: string; family: string; seconds: number; predictedBytes: number; measuredBytes: number }): void;
  onLoadError?(event: { name: string; error: ShoalError }): void;
  onEvict?(event: { name: string; reason: EvictionReason; bytes: number }): void;
  /** After every change of residency (for gauges). */
  onChange?(snapshot: PoolSnapshot): void;
}

export interface ModelPoolOptions {
  resolve: (name: string) => Promise<ModelProfile>;
  runtime: RuntimeOptions;
  budgetBytes: number;
  /** Predicted resident bytes of a model (see memory.ts). */
  predict: (profile: ModelProfile) => Promise<number>;
  /** Predicted bytes of an extra interactive session (weights plus a small batch). */
  predictInteractive?: (profile: ModelProfile) => Promise<number>;
  /** Runtime of interactive sessions (fewer threads). */
  interactiveRuntime?: RuntimeOptions;
  /** Unload models idle this long; null = never. */
  idleEvictMs?: number | null;
  /** How long a load waits for models in use to free memory before failing with OVERLOADED. */
  admissionTimeoutMs?: number;
  hooks?: PoolHooks;
  /** Where model threads come from (warm spares make cold loads faster). */
  threads?: ModelThreads;
  /** Evictions for capacity hand their threads to the next load (ModelThreads.give). @default true */
  reuseThreads?: boolean;
  /** Called in the load, after the session exists: returns the model's tuned batch budget, or null. */
  tune?: (worker: ModelWorker) => Promise<number | null>;
}
