import { createReadStream } from 'node:fs';
import { Readable } from 'node:stream';
import { randomUUID } from 'node:crypto';
import type { NatsConnection } from '@nats-io/transport-node';
import { PayloadStore, type ReadLimit } from '../../adapters/nats/connection/payloads.js';
import { S3Store, type S3SettingsInput } from '../../adapters/object-store/index.js';
import { MAX_DOCUMENT_BYTES } from '../../adapters/protocol/limits.js';
import { ErrorCode, ShoalError } from '../../adapters/protocol/errors.js';
import { natsNames } from '../../adapters/protocol/subjects.js';
import type { Logger } from '../../adapters/observability/logger.js';
import type { ShoalMetrics } from '../../adapters/observability/metrics.js';
import type { IngestRunStatus } from '../../adapters/protocol/ingest.js';
import { checkJobId } from '../../adapters/protocol/subjects.js';
import type { Store } from '../../adapters/stores/store.js';
import { NatsIngest, runContentHash } from '../../pipelines/documents/nats-ingest.js';
import { pruneRemoved, type PruneRoot } from '../../pipelines/documents/prune.js';
import type { IngestSummary } from '../../pipelines/documents/runner.js';
import type { PendingSource } from '../../pipelines/documents/sources.js';
import { StoreHealth } from '../../pipelines/documents/store-health.js';
import { DocumentProducer } from '../../pipelines/documents/document-producer.js';
import type { IngestApi, IngestJobsStart, IngestRecord, IngestStart } from './context.js';
import { openIndexStore, type IndexStoreOptions } from './index-stores.js';
import { expandFolders } from './ingest-folders.js';
import { IngestStoreGauge } from './ingest-health.js';

/**
 * POST /v1/ingest runs: the gateway process coordinates each run in the background (the same
 * NatsIngest as `shoal ingest --nats`: parse tasks and encode jobs for the workers, rows
 * committed through the configured index's sink), and its status is the run status in the
 * ingest KV bucket. A job id names one run's content (pipeline, index, sources, force, prune):
 * resubmitting it with the same content answers its status and starts nothing, with other content
 * is 409 JOB_CONFLICT (decided atomically, KV create), and a run whose coordinator died (no
 * heartbeat, pipelines/documents/run-lease.ts) is started again by a resubmission of the same content.
 * A gateway stopped mid-run stops intake; what was committed stays, and a resubmission under a
 * new id skips it (unchanged documents are not redone). With `prune`, the documents of the run's
 * `file://` folders that are no longer there are deleted once it is over (pipelines/documents/
 * prune.ts, as `shoal ingest --prune`), before its final status, which carries `removed`.
 */

/** Documents in one run once folders are walked (the request body holds as many sources at most). */
const MAX_RUN_SOURCES = 10_000;

export interface IngestRunsOptions {
  /** The gateway's NATS connection (throws UNAVAILABLE while it is not connected). */
  connection: () => NatsConnection;
  prefix: string;
  /** Replicas of the ingest stream and bucket when this gateway creates them (SHOAL_STREAM_REPLICAS). @default 1 */
  replicas?: number;
  /** Folders `file://` references may point into. @default [] */
  fileRoots?: readonly string[];
  /**
   * The S3 settings of this gateway's jobs (SHOAL_S3_BUCKETS among them), or its S3 store: the
   * same allow-list decides an ingest source's bucket as a job's target. Required, so no run
   * reads S3 with defaults that allow every bucket.
   */
  s3: S3SettingsInput | S3Store;
  /** Credentials and S3 settings the configured indexes are opened with. */
  indexOptions?: IndexStoreOptions;
  /** A run fails after this long with no parse worker. @default 300000 */
  parseWorkerTimeoutMs?: number;
  /** How often a run's status is rewritten (its heartbeat). @default 5000 */
  runHeartbeatMs?: number;
  logger?: Logger;
  /** Where shoal_sink_degraded and the index write metrics go. @default none */
  metrics?: ShoalMetrics;
}

export class IngestRuns implements IngestApi {
  readonly #options: IngestRunsOptions;
  readonly #stop = new AbortController();
  readonly #running = new Set<Promise<void>>();
  #opened: Promise<{ ingest: NatsIngest; payloads: PayloadStore }> | null = null;
  #producer: Promise<DocumentProducer> | null = null;
  readonly #gauge: IngestStoreGauge;

  constructor(options: IngestRunsOptions) {
    this.#options = options;
    this.#gauge = new IngestStoreGauge(options.metrics, options.logger);
  }

  #open(): Promise<{ ingest: NatsIngest; payloads: PayloadStore }> {
    if (this.#opened === null) {
      const nc = this.#options.connection();
      const opening = NatsIngest.open(nc, {
        prefix: this.#options.prefix,
        ...(this.#options.replicas === undefined ? {} : { replicas: this.#options.replicas }),
        ...(this.#options.parseWorkerTimeoutMs === undefined ? {} : { parseWorkerTimeoutMs: this.#options.parseWorkerTimeoutMs }),
        ...(this.#options.runHeartbeatMs === undefined ? {} : { heartbeatMs: this.#options.runHeartbeatMs }),
      }).then((ingest) => ({
        ingest,
        payloads: new PayloadStore(nc, {
          bucket: natsNames(this.#options.prefix).payloadBucket,
          fileRoots: this.#options.fileRoots ?? [],
          ...(this.#options.s3 instanceof S3Store ? { s3Store: this.#options.s3 } : { s3: this.#options.s3 }),
        }),
      }));
      opening.catch(() => (this.#opened = null));
      this.#opened = opening;
    }
    return this.#opened;
  }

  async status(jobId: string): Promise<IngestRunStatus | null> {
    const { ingest } = await this.#open();
    return ingest.status(jobId);
  }

  #documentProducer(): Promise<DocumentProducer> {
    if (this.#producer === null) {
      const opening = DocumentProducer.open(this.#options.connection(), { prefix: this.#options.prefix, ...(this.#options.replicas === undefined ? {} : { replicas: this.#options.replicas }) });
      opening.catch(() => (this.#producer = null));
      this.#producer = opening;
    }
    return this.#producer;
  }

  /**
   * POST /v1/ingest with SHOAL_DOCUMENT_JOBS: the run is published as document jobs (one per
   * source; folders walked here) and this gateway keeps nothing of it: any replica answers its
   * status from the ledger, and a restart loses nothing. The run id names this content only
   * (resubmitting it answers its status, other content is JOB_CONFLICT).
   */
  async startJobs(request: IngestJobsStart): Promise<IngestRunStatus> {
    const { payloads } = await this.#open();
    const producer = await this.#documentProducer();
    const runId = checkJobId(request.job_id ?? randomUUID());
    const contentHash = runContentHash({ jobs: true, pipeline: request.pipeline, index: request.index, records: request.records });
    const stored = await producer.status(runId);
    if (stored !== null) {
      if (stored.content_hash === contentHash) return stored;
      throw new ShoalError(ErrorCode.JOB_CONFLICT, `job id "${runId}" is already used by a different ingest run (pipeline "${stored.pipeline}", index "${stored.index}", ${stored.documents.total} documents); choose another job id`, { details: { job_id: runId, kind: 'ingest', state: stored.state } });
    }
    for (const record of request.records) if ('ref' in record) payloads.checkSource(record.ref);
    const expanded = await expandFolders(request.records, this.#options.fileRoots ?? [], MAX_RUN_SOURCES);
    const limit = documentLimit(MAX_DOCUMENT_BYTES);
    // References the workers read themselves (obj://, s3://; file:// inside the shared roots) travel as they are.
    const sources = expanded.records.map((record) => pendingOf(record, payloads, limit));
    await producer.publish({ runId, pipeline: request.pipeline, index: request.index, sources, contentHash, references: expanded.records.map((record) => ('ref' in record ? { uri: record.ref, ...(record.id === undefined ? {} : { id: record.id }) } : null)) });
    return (await producer.status(runId)) ?? existingOrThrow(runId);
  }

  async stage(name: string, path: string): Promise<string> {
    const { payloads } = await this.#open();
    // Chunk by chunk from the temp file: an upload is never held whole in memory.
    const chunks = createReadStream(path, { highWaterMark: 128 * 1024 });
    return payloads.putStream(name, Readable.toWeb(chunks));
  }

  async start(request: IngestStart): Promise<IngestRunStatus> {
    const { ingest, payloads } = await this.#open();
    const runId = checkJobId(request.job_id ?? randomUUID());
    // The run id names this content only: resubmitting it is idempotent, other content is JOB_CONFLICT.
    const contentHash = runContentHash({ pipeline: request.definition, index: request.index.name, records: request.records, force: request.force, prune: request.prune });
    const stored = await ingest.status(runId);
    if (stored !== null && stored.content_hash === contentHash && stored.abandoned_at === undefined) return stored;
    // Every reference is checked as a job's would be (S3 allow-list, this deployment's object
    // stores, the file roots) before anything is queued: a refused one fails the request (422).
    for (const record of request.records) if ('ref' in record) payloads.checkSource(record.ref);
    const expanded = await expandFolders(request.records, this.#options.fileRoots ?? [], MAX_RUN_SOURCES);
    const limit = documentLimit(request.definition.stages.parse.maxBytes);
    const sources = expanded.records.map((record) => pendingOf(record, payloads, limit));
    // One atomic decision between concurrent submissions of this id (KV create, run-lease.ts).
    const claim = await ingest.claim({ runId, definition: request.definition, index: request.index.name, total: sources.length, contentHash });
    if ('existing' in claim) return claim.existing;
    const { lease } = claim;
    // A failing index marks the run `degraded` (its status) and sets shoal_sink_degraded while the run waits on it.
    const health = new StoreHealth();
    const unfollow = this.#gauge.follow(runId, health);
    const sink = openIndexStore(request.index.target, this.#options.indexOptions, health.sinkObserver(this.#options.metrics?.sinkObserver));
    const run = ingest
      .run(
        {
          runId,
          lease,
          definition: request.definition,
          sink,
          index: request.index.name,
          force: request.force,
          signal: this.#stop.signal,
          health,
          onWarning: (message) => this.#options.logger?.warn({ run: runId }, message),
          afterRun: (summary) => (request.prune === true ? this.#prune(runId, sink, expanded.roots, sources, summary) : Promise.resolve({ ...summary, removed: 0 })),
        },
        sources,
      )
      .then(
        (summary) => this.#options.logger?.info({ run: runId, documents: summary.documents, chunks: summary.chunks }, 'ingest run finished'),
        (error: unknown) => this.#options.logger?.warn({ run: runId, err: String(error) }, 'ingest run failed'),
      )
      .finally(async () => {
        unfollow();
        await sink.close().catch(() => undefined);
        this.#running.delete(run);
      });
    this.#running.add(run);
    return (await ingest.status(runId)) ?? existingOrThrow(runId);
  }

  /** `shoal ingest --prune` after a run: the same decision (pipelines/documents/prune.ts), skipped roots logged. */
  async #prune(runId: string, sink: Store, roots: readonly PruneRoot[], sources: readonly PendingSource[], summary: IngestSummary): Promise<IngestSummary> {
    if (roots.length === 0) {
      this.#options.logger?.warn({ run: runId }, 'prune: no file:// folder among the sources (files, records and obj:// references are never pruned); nothing removed');
      return { ...summary, removed: 0 };
    }
    const outcome = await pruneRemoved(sink, roots, { seen: sources.map((source) => source.uri), failed: summary.failed });
    for (const skipped of outcome.skipped) this.#options.logger?.warn({ run: runId, root: skipped.root }, `prune left this folder alone: ${skipped.reason}`);
    return { ...summary, removed: outcome.removed.length };
  }

  /** Stops intake of every run (each commits what it finished) and waits for them. */
  async close(): Promise<void> {
    this.#stop.abort();
    await Promise.all([...this.#running]);
    const producer = this.#producer;
    this.#producer = null;
    (await producer?.catch(() => null))?.close();
    const opened = this.#opened;
    this.#opened = null;
    if (opened !== null) await (await opened.catch(() => null))?.ingest.close();
  }
}

function existingOrThrow(runId: string): never {
  throw new ShoalError(ErrorCode.INTERNAL, `the status of ingest run ${runId} vanished right after it was written`);
}

/**
 * What a run's source may weigh when the gateway reads it: the run's parse limit, never more than
 * MAX_DOCUMENT_BYTES (a request's definition cannot make the gateway hold a larger file), refused
 * DOCUMENT_TOO_LARGE from the size (fstat, object info) before it is read.
 */
function documentLimit(parseMaxBytes: number): ReadLimit {
  const maxBytes = Math.min(parseMaxBytes, MAX_DOCUMENT_BYTES);
  return {
    maxBytes,
    tooLarge: (size, ref) => new ShoalError(ErrorCode.DOCUMENT_TOO_LARGE, `${ref} has ${size} bytes, over the document limit of ${maxBytes} bytes`, { details: { limit: 'maxBytes', size, max: maxBytes } }),
  };
}

function pendingOf(record: IngestRecord, payloads: PayloadStore, limit: ReadLimit): PendingSource {
  const metadata = record.metadata === undefined ? {} : { metadata: record.metadata };
  if ('text' in record) {
    const { id, text } = record;
    return { uri: id, ...metadata, load: async () => ({ source: { uri: id, id, text, ...metadata }, bytes: new TextEncoder().encode(text) }) };
  }
  const uri = record.id ?? record.ref;
  return {
    uri,
    ...metadata,
    load: async () => {
      // obj:// from the object store, file:// only inside the configured roots (PayloadStore checks).
      const bytes = await payloads.get(record.ref, limit);
      return { source: { uri, bytes, ...(record.id === undefined ? {} : { id: record.id }), ...metadata }, bytes };
    },
  };
}
