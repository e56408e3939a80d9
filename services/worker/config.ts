import { ShoalSettings } from '../settings/shoal-settings.js';
import { hostname } from 'node:os';
import { z } from 'zod';
import { NatsConnectionSettings } from '../../adapters/nats/connection/connection.js';
import { ConsumerSettings, TopologySettings } from '../../adapters/nats/connection/topology.js';
import { S3Settings } from '../../adapters/object-store/index.js';
import { ErrorCode } from '../../adapters/protocol/errors.js';
import { parseWith } from '../../adapters/protocol/validate.js';
import { EngineSettings, engineSettingsFromEnv, wholeNumber } from '../settings/engine-settings.js';
import { splitDirs, splitList } from '../settings/environment.js';
import { isTrueValue, SETTINGS } from '../settings/table.js';

/**
 * Configuration of `shoal worker`, validated once and frozen. Sources, weakest first: defaults,
 * environment variables (workerConfigFromEnv), command-line flags (the CLI merges them on top).
 */

export const WorkerConfig = z.strictObject({
  nats: NatsConnectionSettings,
  topology: TopologySettings.prefault({}),
  consumer: ConsumerSettings.prefault({}),
  engine: EngineSettings.prefault({}),
  /** Models served (catalog names, hub ids or folders); empty = every catalog entry, else every model under the model dirs. */
  models: z.array(z.string().min(1)).default([]),
  /** Models loaded at start and kept resident. */
  preload: z.array(z.string().min(1)).default([]),
  /**
   * Job parts in flight at once. Enough items must wait in the engine's queue for full batches
   * while parts are fetched and results published: 32 parts of 64 items kept the NATS path at
   * the in-process engine's throughput (bench/nats.ts), 8 did not. @default 32
   */
  concurrency: z.number().int().min(1).max(1024).default(SETTINGS.concurrency.default),
  /** How long a drain (SIGTERM) may take before in-flight parts are aborted and nak'ed. @default 30000 */
  drainTimeoutMs: z.number().int().min(0).default(SETTINGS.drainTimeoutMs.default),
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
  /**
   * Address the metrics port listens on (SHOAL_METRICS_HOST): loopback, as the gateway and the
   * sink; containers set 0.0.0.0 for a scraper in another pod (the Helm chart, compose).
   * @default 127.0.0.1
   */
  metricsHost: z.string().min(1).default(SETTINGS.metricsHost.default),
  /** Folders `file://` payload and result references may use; empty = refused. */
  fileRoots: z.array(z.string().min(1)).default([]),
  /** Also run parse tasks of `shoal ingest --nats` (SHOAL_PARSE): document parsing, OCR through this engine. @default false */
  parse: z.boolean().default(false),
  /** Run document jobs end to end (SHOAL_DOCUMENTS; pipelines/documents/document-jobs.ts). @default false */
  documents: z.boolean().default(false),
  /** Run classification jobs (SHOAL_CLASSIFY; pipelines/classify/classify-jobs.ts). @default false */
  classify: z.boolean().default(false),
  /** Pipelines the documents role serves (SHOAL_DOCUMENT_PIPELINES). @default ['documents'] */
  documentPipelines: z.array(z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'pipeline names are 1-64 characters of A-Z a-z 0-9 _ -')).min(1).max(64).default(['documents']),
  /** No progress this long gives a documents batch's jobs back (SHOAL_DOCUMENTS_STALL_MS; pipelines/documents/batch-progress.ts); 0 never. @default 3600000 */
  documentStallMs: z.number().int().min(0).default(SETTINGS.documentStallMs.default),
  /** Folder of pipeline files a document job may name (SHOAL_PIPELINES). @default none */
  pipelinesDir: z.string().min(1).nullable().default(null),
  /** Indexes a document job may name (SHOAL_INDEXES): name → folder or URI. @default none */
  indexes: z.record(z.string(), z.string().min(1)).default({}),
  /** Ceilings on what a parse task may ask for (SHOAL_PARSE_MAX_PAGES, SHOAL_PARSE_MAX_BYTES, SHOAL_PARSE_MAX_DPI; pipelines/documents/parse-limits.ts). */
  parseLimits: z
    .strictObject({
      maxPages: z.number().int().positive().default(SETTINGS.parseMaxPages.default),
      maxBytes: z.number().int().positive().default(SETTINGS.parseMaxBytes.default),
      maxDpi: z.number().int().min(36).max(600).default(SETTINGS.parseMaxDpi.default),
    })
    .prefault({}),
  /** S3 for `s3://` payload references and result targets (AWS_* variables, SHOAL_S3_BUCKETS; never logged). */
  s3: S3Settings.prefault({}),
  /** When models are found in the model dirs (none named, no catalog), serve the built-in models too (`shoal dev`). @default false */
  serveBuiltins: z.boolean().default(false),
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

const NESTED = new Set(['nats', 'topology', 'consumer', 'engine', 's3']);

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

/** Partial input with only what the environment sets (zod reports bad values by field). */
export function workerConfigFromEnv(from: ShoalSettings | NodeJS.ProcessEnv): Record<string, unknown> {
  const settings = ShoalSettings.from(from);
  const out: Record<string, unknown> = { nats: { ...settings.nats }, engine: engineSettingsFromEnv(settings.variables), s3: { ...settings.s3 } };
  const put = (target: Record<string, unknown>, key: string, value: unknown): void => {
    if (value !== undefined) target[key] = value;
  };
  const topology: Record<string, unknown> = {};
  put(topology, 'prefix', settings.value('subjectPrefix'));
  put(topology, 'replicas', wholeNumber(settings.value('streamReplicas')));
  if (Object.keys(topology).length > 0) out.topology = topology;
  const consumer: Record<string, unknown> = {};
  put(consumer, 'ackWaitMs', wholeNumber(settings.value('ackWaitMs')));
  put(consumer, 'maxDeliver', wholeNumber(settings.value('maxDeliver')));
  if (Object.keys(consumer).length > 0) out.consumer = consumer;
  put(out, 'models', splitList(settings.value('models')));
  put(out, 'preload', splitList(settings.value('preload')));
  put(out, 'concurrency', wholeNumber(settings.value('concurrency')));
  put(out, 'drainTimeoutMs', wholeNumber(settings.value('drainTimeoutMs')));
  put(out, 'workerId', settings.value('workerId'));
  put(out, 'metricsPort', wholeNumber(settings.value('metricsPort')));
  put(out, 'metricsHost', settings.value('metricsHost'));
  put(out, 'fileRoots', splitDirs(settings.value('fileRoots')));
  const documents = settings.value('documentsRole');
  put(out, 'documents', documents === undefined ? undefined : isTrueValue(documents));
  const classify = settings.value('classifyRole');
  put(out, 'classify', classify === undefined ? undefined : isTrueValue(classify));
  put(out, 'documentPipelines', splitList(settings.value('documentPipelines')));
  put(out, 'documentStallMs', wholeNumber(settings.value('documentStallMs')));
  put(out, 'pipelinesDir', settings.value('pipelinesDir'));
  put(out, 'indexes', settings.indexes === undefined ? undefined : { ...settings.indexes });
  const parse = settings.value('parseRole');
  put(out, 'parse', parse === undefined ? undefined : isTrueValue(parse));
  const parseLimits: Record<string, unknown> = {};
  put(parseLimits, 'maxPages', wholeNumber(settings.value('parseMaxPages')));
  put(parseLimits, 'maxBytes', wholeNumber(settings.value('parseMaxBytes')));
  put(parseLimits, 'maxDpi', wholeNumber(settings.value('parseMaxDpi')));
  if (Object.keys(parseLimits).length > 0) out.parseLimits = parseLimits;
  return out;
}
