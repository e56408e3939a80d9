import { hostname } from 'node:os';
import { delimiter } from 'node:path';
import { z } from 'zod';
import { NatsConnectionSettings, natsSettingsFromEnv } from '../../adapters/nats/connection.js';
import { ConsumerSettings, TopologySettings } from '../../adapters/nats/topology.js';
import { ErrorCode } from '../../adapters/protocol/errors.js';
import { parseWith } from '../../adapters/protocol/validate.js';
import { ExecutionProvider } from '../../adapters/runtime/ort-session.js';

/**
 * Configuration of `shoal worker`, validated once and frozen. Sources, weakest first: defaults,
 * environment variables (workerConfigFromEnv), command-line flags (the CLI merges them on top).
 */

export const WorkerEngineSettings = z.strictObject({
  /** Catalog file or folder; null = models by id or path only. */
  catalog: z.string().min(1).nullable().default(null),
  /** Folders holding models as `org/name/`. */
  modelDirs: z.array(z.string().min(1)).default([]),
  /** ORT intra-op threads per model; null = all cores. */
  threads: z.number().int().min(1).max(1024).nullable().default(null),
  providers: z.array(ExecutionProvider).min(1).default(['cpu']),
  /** Padded tokens per batch, or 'auto' (measured per model on this machine); null = the engine's default. */
  batchTokens: z.union([z.number().int().min(1), z.literal('auto')]).nullable().default(null),
  /** Folders image items may name by path (SHOAL_IMAGE_ROOTS); empty = images travel as bytes/base64 only. */
  imageRoots: z.array(z.string().min(1)).default([]),
  /** Hosts image URLs may be fetched from (SHOAL_IMAGE_HOSTS, exact or *.example.com); empty = none. */
  imageHosts: z.array(z.string().min(1)).default([]),
  /** Memory for models: bytes, "2GiB", "60%"; default: the engine's (half the RAM). */
  memoryBudget: z.union([z.number().int().positive(), z.string().min(1)]).optional(),
});

export const WorkerConfig = z.strictObject({
  nats: NatsConnectionSettings,
  topology: TopologySettings.prefault({}),
  consumer: ConsumerSettings.prefault({}),
  engine: WorkerEngineSettings.prefault({}),
  /** Models served (catalog names, hub ids or folders); empty = every catalog entry, else every model under the model dirs. */
  models: z.array(z.string().min(1)).default([]),
  /** Models loaded at start and kept resident. */
  preload: z.array(z.string().min(1)).default([]),
  /**
   * Job parts in flight at once. Enough items must wait in the engine's queue for full batches
   * while parts are fetched and results published: 32 parts of 64 items kept the NATS path at
   * the in-process engine's throughput (bench/nats.ts), 8 did not. @default 32
   */
  concurrency: z.number().int().min(1).max(1024).default(32),
  /** How long a drain (SIGTERM) may take before in-flight parts are aborted and nak'ed. @default 30000 */
  drainTimeoutMs: z.number().int().min(0).default(30_000),
  /** Name in results, replies and logs. @default `<hostname>-<pid>` */
  workerId: z.string().min(1).max(200).default(`${hostname()}-${process.pid}`),
  /** First redelivery delay of a retryable failure (doubles per delivery). @default 1000 */
  retryDelayMs: z.number().int().min(0).default(1000),
  /** @default 30000 */
  maxRetryDelayMs: z.number().int().min(0).default(30_000),
  /** A part running longer fails with TIMEOUT. @default 600000 */
  partTimeoutMs: z.number().int().min(1000).default(600_000),
  /** How long work for a model not resident here waits for a worker that holds it. @default 1000 */
  affinityWaitMs: z.number().int().min(0).default(1000),
  /** Longest a request-reply call may run. @default 120000 */
  maxRequestMs: z.number().int().min(100).default(120_000),
  /** Port of the worker's HTTP `/metrics`, `/healthz` and `/readyz` (SHOAL_METRICS_PORT); null = not served. */
  metricsPort: z.number().int().min(0).max(65535).nullable().default(null),
  /** Address the metrics port listens on (SHOAL_METRICS_HOST): all interfaces, for a scraper in another pod. @default 0.0.0.0 */
  metricsHost: z.string().min(1).default('0.0.0.0'),
  /** Folders `file://` payload and result references may use; empty = refused. */
  fileRoots: z.array(z.string().min(1)).default([]),
});
export type WorkerConfig = z.output<typeof WorkerConfig>;
export type WorkerConfigInput = z.input<typeof WorkerConfig>;

export function resolveWorkerConfig(input: WorkerConfigInput): WorkerConfig {
  return parseWorkerConfig(input);
}

/** For input assembled from the environment and flags (checked here, field by field). */
export function parseWorkerConfig(input: unknown): WorkerConfig {
  return Object.freeze(parseWith(WorkerConfig, input, 'worker configuration', ErrorCode.CONFIG_INVALID));
}

const NESTED = new Set(['nats', 'topology', 'consumer', 'engine']);

function isRecord(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/** `over` wins key by key; the nested sections (nats, topology, consumer, engine) merge one level down. */
export function mergeWorkerInput(base: Record<string, unknown>, over: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...base };
  for (const [key, value] of Object.entries(over)) {
    if (value === undefined) continue;
    const current = out[key];
    out[key] = NESTED.has(key) && isRecord(current) && isRecord(value) ? { ...current, ...value } : value;
  }
  return out;
}

function set(env: NodeJS.ProcessEnv, name: string): string | undefined {
  const value = env[name];
  return value === undefined || value.trim() === '' ? undefined : value.trim();
}

function list(value: string | undefined, separator: string | RegExp = ','): string[] | undefined {
  return value?.split(separator).map((s) => s.trim()).filter((s) => s !== '');
}

/** A whole number from the environment; anything else is passed through for zod to name. */
function int(value: string | undefined): number | string | undefined {
  if (value === undefined) return undefined;
  return /^\d+$/.test(value) ? Number(value) : value;
}

/** Partial input with only what the environment sets (zod reports bad values by field). */
export function workerConfigFromEnv(env: NodeJS.ProcessEnv = process.env): Record<string, unknown> {
  const out: Record<string, unknown> = { nats: natsSettingsFromEnv(env) };
  const topology: Record<string, unknown> = {};
  const prefix = set(env, 'SHOAL_SUBJECT_PREFIX');
  if (prefix !== undefined) topology.prefix = prefix;
  if (Object.keys(topology).length > 0) out.topology = topology;
  const consumer: Record<string, unknown> = {};
  if (set(env, 'SHOAL_ACK_WAIT_MS') !== undefined) consumer.ackWaitMs = int(set(env, 'SHOAL_ACK_WAIT_MS'));
  if (set(env, 'SHOAL_MAX_DELIVER') !== undefined) consumer.maxDeliver = int(set(env, 'SHOAL_MAX_DELIVER'));
  if (Object.keys(consumer).length > 0) out.consumer = consumer;
  const engine: Record<string, unknown> = {};
  if (set(env, 'SHOAL_CATALOG') !== undefined) engine.catalog = set(env, 'SHOAL_CATALOG');
  if (set(env, 'SHOAL_MODEL_DIR') !== undefined) engine.modelDirs = list(set(env, 'SHOAL_MODEL_DIR'), delimiter);
  if (set(env, 'SHOAL_THREADS') !== undefined) engine.threads = int(set(env, 'SHOAL_THREADS'));
  if (set(env, 'SHOAL_PROVIDERS') !== undefined) engine.providers = list(set(env, 'SHOAL_PROVIDERS'));
  if (set(env, 'SHOAL_BATCH_TOKENS') !== undefined) engine.batchTokens = int(set(env, 'SHOAL_BATCH_TOKENS'));
  if (set(env, 'SHOAL_IMAGE_ROOTS') !== undefined) engine.imageRoots = list(set(env, 'SHOAL_IMAGE_ROOTS'), delimiter);
  if (set(env, 'SHOAL_IMAGE_HOSTS') !== undefined) engine.imageHosts = list(set(env, 'SHOAL_IMAGE_HOSTS'));
  if (set(env, 'SHOAL_MEMORY_BUDGET') !== undefined) engine.memoryBudget = set(env, 'SHOAL_MEMORY_BUDGET');
  if (Object.keys(engine).length > 0) out.engine = engine;
  if (set(env, 'SHOAL_MODELS') !== undefined) out.models = list(set(env, 'SHOAL_MODELS'));
  if (set(env, 'SHOAL_PRELOAD') !== undefined) out.preload = list(set(env, 'SHOAL_PRELOAD'));
  if (set(env, 'SHOAL_CONCURRENCY') !== undefined) out.concurrency = int(set(env, 'SHOAL_CONCURRENCY'));
  if (set(env, 'SHOAL_DRAIN_TIMEOUT_MS') !== undefined) out.drainTimeoutMs = int(set(env, 'SHOAL_DRAIN_TIMEOUT_MS'));
  if (set(env, 'SHOAL_WORKER_ID') !== undefined) out.workerId = set(env, 'SHOAL_WORKER_ID');
  if (set(env, 'SHOAL_METRICS_PORT') !== undefined) out.metricsPort = int(set(env, 'SHOAL_METRICS_PORT'));
  if (set(env, 'SHOAL_METRICS_HOST') !== undefined) out.metricsHost = set(env, 'SHOAL_METRICS_HOST');
  if (set(env, 'SHOAL_FILE_ROOTS') !== undefined) out.fileRoots = list(set(env, 'SHOAL_FILE_ROOTS'), delimiter);
  return out;
}
