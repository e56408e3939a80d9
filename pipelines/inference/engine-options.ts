import { availableParallelism } from 'node:os';
import { z } from 'zod';
import { ErrorCode } from '../../adapters/protocol/errors.js';
import { parseWith } from '../../adapters/protocol/validate.js';
import { RuntimeOptions } from '../../adapters/runtime/runtime-options.js';
import type { DownloadProgress } from '../../adapters/sources/hub-download.js';
import { ImagePolicy } from '../../adapters/sources/image-input.js';
import { SourceOptions, resolveSourceOptions } from '../../adapters/sources/resolve.js';
import type { Catalog } from './catalog.js';
import { defaultMemoryBudget, parseBytes } from './memory.js';
import type { PoolHooks } from './pool-options.js';
import { DEFAULT_SCHEDULER_OPTIONS, type SchedulerHooks } from './scheduler-options.js';

/**
 * Options of the in-process engine, with their defaults. The engine reads no environment
 * variables: services build these options from flags, variables and config files
 * (services/settings); everything is validated once and frozen.
 */

const ByteSize = z.union([z.number().int().positive(), z.string().min(1)]);

/**
 * The default batch budget of a model running int8. int8 matmuls run fastest on smaller batches
 * (their activations stay in cache): raw onnxruntime on bench-minilm-l6's int8 graph, 2 threads,
 * ran 1.1-2.0x faster at 512 than at 1,024 or 2,048 in three runs on both corpora
 * (bench/throughput.ts, 2026-11-25, a busy shared machine); fp32 keeps the 2,048 default.
 * `maxBatchTokens: 'auto'` measures the best budget on the machine at hand instead.
 */
export const INT8_BATCH_TOKENS = 512;

export const EngineOptions = z.strictObject({
  sources: SourceOptions.optional(),
  runtime: RuntimeOptions.optional(),
  /** Prep (tokenization) threads. @default 1 */
  prepThreads: z.number().int().min(1).max(64).default(1),
  /**
   * Padded tokens per batch (longest × items); a model's catalog `options.maxBatchTokens` overrides it.
   * 'auto' measures the best budget of each model on this machine once (cached in the runtime's cacheDir, `tuning/`).
   * @default 1024, and `INT8_BATCH_TOKENS` (512) for a model that runs int8
   */
  maxBatchTokens: z.union([z.number().int().min(1), z.literal('auto')]).optional(),
  /** @default 256 */
  maxBatchItems: z.number().int().min(1).default(DEFAULT_SCHEDULER_OPTIONS.maxBatchItems),
  /** Longest wait to fill a bulk batch while more items are being prepared. @default 2 */
  maxWaitMs: z.number().min(0).max(10_000).default(DEFAULT_SCHEDULER_OPTIONS.maxWaitMs),
  /** Primary batches running at once; default 1 on CPU (each batch uses all cores), 2 with a GPU provider. */
  maxConcurrentBatches: z.number().int().min(1).max(64).optional(),
  /** Items queued over all models before bulk submitters wait. @default 50000 */
  maxQueuedItems: z.number().int().min(1).default(DEFAULT_SCHEDULER_OPTIONS.maxQueuedItems),
  /** Adapt batch budgets so a bulk batch takes about this many ms (null: fixed budgets). */
  targetBatchMs: z.number().positive().nullable().default(null),
  /** Memory for models: bytes, "2GiB", "512MB" or "60%" of RAM; default 50% of RAM (or of the container limit). */
  memoryBudget: ByteSize.optional(),
  /** Unload models unused this long (seconds); null = keep them until memory is needed. */
  idleEvictSeconds: z.number().positive().nullable().default(null),
  /** How long a model load waits for busy models to free memory. @default 60000 */
  admissionTimeoutMs: z.number().int().min(0).default(60_000),
  /** Give models with interactive traffic a second session (and queries a tokenizer thread of their own) so queries never wait behind bulk work. @default true */
  interactiveSessions: z.boolean().default(true),
  /** Intra-op threads of interactive sessions; default half the cores. */
  interactiveThreads: z.number().int().min(1).max(1024).optional(),
  /**
   * Nice value of bulk model threads (Linux per-thread priority, inherited by onnxruntime's threads):
   * while a query runs on its interactive session beside a bulk batch, the query gets the cores.
   * 0 disables. @default 10
   */
  bulkNice: z.number().int().min(0).max(19).default(10),
  /** Requests without a priority and at most this many items use the interactive lane. @default 32 */
  interactiveMaxItems: z.number().int().min(0).default(32),
  /** Model threads kept started and idle, so a cold load skips thread start-up. @default 1 */
  spareThreads: z.number().int().min(0).max(8).default(1),
  /**
   * A model evicted to make room for another hands its thread to that load (no thread start-up:
   * a small model reloads in tens of ms instead of most of a second). Reused threads keep some
   * freed native memory in their allocator arenas; false stops every evicted model's thread, for
   * the lowest RSS when models are swapped all the time. @default true
   */
  reuseModelThreads: z.boolean().default(true),
  /** Models to load at start and keep resident (never evicted). */
  preload: z.array(z.string()).default([]),
  /** Where image items may come from and how large they may be (local roots, URL hosts, bytes, pixels). */
  images: ImagePolicy.optional(),
  /** Serve models that are not in the catalog, by hub id or local path. @default true */
  allowUnlisted: z.boolean().default(true),
});
export type EngineOptionsInput = z.input<typeof EngineOptions> & {
  catalog?: Catalog;
  /** Called while a model is downloaded from the hub (the CLI draws a progress bar with it). */
  onDownloadProgress?: (event: DownloadProgress) => void;
  hooks?: { pool?: PoolHooks; scheduler?: SchedulerHooks };
};

export interface ResolvedEngineOptions
  extends Omit<z.output<typeof EngineOptions>, 'memoryBudget' | 'sources' | 'runtime' | 'maxConcurrentBatches' | 'images' | 'maxBatchTokens'> {
  /** The fixed budget, or the fallback while tuning is impossible (untunable families). */
  maxBatchTokens: number;
  autoBatchTokens: boolean;
  /** The budget of a model that runs int8 when none was configured; null when one was. */
  int8BatchTokens: number | null;
  sources: SourceOptions;
  images: ImagePolicy;
  runtime: RuntimeOptions;
  interactiveRuntime: RuntimeOptions;
  memoryBudgetBytes: number;
  maxConcurrentBatches: number;
}

export function resolveEngineOptions(input: Omit<EngineOptionsInput, 'catalog' | 'onDownloadProgress' | 'hooks'>): ResolvedEngineOptions {
  const options = parseWith(EngineOptions, input, 'engine options', ErrorCode.CONFIG_INVALID);
  const configured = options.runtime ?? RuntimeOptions.parse({});
  // Primary sessions serve bulk batches: they yield the cores to interactive sessions.
  const runtime = { ...configured, nice: Math.max(configured.nice, options.interactiveSessions ? options.bulkNice : 0) };
  const cpuOnly = runtime.providers.every((p) => p === 'cpu');
  const interactiveThreads = options.interactiveThreads ?? Math.max(1, Math.floor(availableParallelism() / 2));
  const { memoryBudget, sources, maxConcurrentBatches, images, maxBatchTokens, ...rest } = options;
  return Object.freeze({
    ...rest,
    maxBatchTokens: maxBatchTokens === 'auto' || maxBatchTokens === undefined ? DEFAULT_SCHEDULER_OPTIONS.maxBatchTokens : maxBatchTokens,
    autoBatchTokens: maxBatchTokens === 'auto',
    int8BatchTokens: maxBatchTokens === undefined ? INT8_BATCH_TOKENS : null,
    images: images ?? ImagePolicy.parse({}),
    sources: sources ?? resolveSourceOptions(),
    runtime,
    interactiveRuntime: { ...configured, intraOpThreads: interactiveThreads },
    memoryBudgetBytes: memoryBudget === undefined ? defaultMemoryBudget(runtime.providers) : typeof memoryBudget === 'number' ? memoryBudget : parseBytes(memoryBudget),
    maxConcurrentBatches: maxConcurrentBatches ?? (cpuOnly ? 1 : 2),
  });
}
