import { randomUUID } from 'node:crypto';
import { withNatsRetry } from '../../adapters/nats/connection/nats-retry.js';
import type { NatsConnection } from '@nats-io/transport-node';
import { NatsEngine } from '../../adapters/nats/rpc/engine-client.js';
import type { ParseConsumerSettings } from '../../adapters/nats/ingest/ingest-store.js';
import { JobsClient } from '../../adapters/nats/jobs/jobs-client.js';
import { JobsEngine } from '../../adapters/nats/jobs/jobs-engine.js';
import { ParseTaskClient } from '../../adapters/nats/ingest/parse-client.js';
import { ensureTopology } from '../../adapters/nats/connection/topology.js';
import { ErrorCode, ShoalError, toShoalError } from '../../adapters/protocol/errors.js';
import { canonicalHash } from '../../adapters/nats/jobs/job-identity.js';
import type { IngestRunStatus } from '../../adapters/protocol/ingest.js';
import { WIRE_VERSION } from '../../adapters/protocol/jobs.js';
import { checkJobId } from '../../adapters/protocol/subjects.js';
import type { Store } from '../../adapters/stores/store.js';
import { redactUri } from '../../adapters/protocol/uri-credentials.js';
import type { PipelineDefinition } from './definition.js';
import { settingsHash } from './identity.js';
import { RemoteParseReader } from './remote-parse.js';
import { RunLease, settleAbandoned, type RunClaim } from './run-lease.js';
import { StoreHealth } from './store-health.js';
import { IngestRunner, type IngestProgress, type IngestStage, type IngestSummary } from './runner.js';
import type { PendingSource } from './sources.js';

/**
 * `shoal ingest --nats` and `POST /v1/ingest`: the same IngestRunner as in process, with its
 * stages fanned out over NATS JetStream. This process is the coordinator: it publishes one parse
 * task per document (bytes in the object store), reads back the pages parse workers store,
 * chunks them (token counts by request-reply from a worker serving the encode model), submits
 * the chunks of many documents as encode jobs on the model's subject (workers batch the parts),
 * and commits each document's rows and state through the Store once all its chunks are encoded.
 * Per-document status lives in the ingest KV bucket; the run's status under `run.<id>`.
 * Rows are identical to an in-process run: same chunker, same deterministic ids, same upserts.
 */

export interface NatsIngestOptions {
  /** Subject prefix. @default 'shoal' */
  prefix?: string;
  /**
   * Replicas of the streams, KV buckets and object store created when missing (clustered
   * JetStream; at most the number of servers). @default 1
   */
  replicas?: number;
  /** Parse consumer settings (ack wait, deliveries). */
  parse?: ParseConsumerSettings;
  /** Chunks per encode job part. @default 64 */
  partItems?: number;
  /**
   * Wait for a request-reply answer (token counts) that may include a model load. Kept short:
   * a call in flight on a worker that died is only noticed when it times out, and it is then
   * retried (a slow first load is retried too, and finds the model loaded). @default 30000
   */
  loadTimeoutMs?: number;
  /** How long request-reply calls are retried while no worker answers (workers restarting). @default 600000 */
  retryForMs?: number;
  /**
   * How long documents may wait with no worker pulling parse tasks before the run fails with
   * UNAVAILABLE (SHOAL_PARSE_WORKER_TIMEOUT_MS); a warning comes after `parseWarnAfterMs`. @default 300000
   */
  parseWorkerTimeoutMs?: number;
  /** @default 5000 */
  parseWarnAfterMs?: number;
  /**
   * How often the coordinator rewrites its run's status (SHOAL_RUN_HEARTBEAT_MS); a run with no
   * write for RUN_ABANDONED_AFTER_BEATS (6) times this reads as failed, abandoned (run-lease.ts). @default 5000
   */
  heartbeatMs?: number;
}

/** What a run is, for its claim on a run id (run-lease.ts). */
export interface RunIdentity {
  runId: string;
  definition: PipelineDefinition;
  /** Where the rows go, as shown in the run's status (an index name or folder). */
  index: string;
  total: number;
  /** SHA-256 of everything the submission decided (runContentHash). */
  contentHash: string;
}

export interface NatsIngestRun {
  /** Run id (also the job id of `GET /v1/jobs/:id`). @default a random UUID */
  runId?: string;
  definition: PipelineDefinition;
  sink: Store;
  /** Where the rows go, as shown in the run's status (an index name or folder). */
  index: string;
  force?: boolean;
  signal?: AbortSignal;
  onProgress?: (progress: IngestProgress) => void;
  onStage?: (stage: IngestStage, milliseconds: number) => void;
  /** Warnings while the run goes on (no parse worker yet). */
  onWarning?: (message: string) => void;
  tableMetadata?: Record<string, string>;
  /**
   * The health of the stores this run uses, when the caller wired it into them (the sink's
   * observer, the S3 store's hooks): while one fails the run's status carries `degraded`.
   */
  health?: StoreHealth;
  /** The run's claim (NatsIngest.claim), when the caller claimed it first (a queued HTTP run). @default claimed here */
  lease?: RunLease;
  /**
   * Runs once every document is committed and before the final status is written (a prune of
   * removed documents), so a caller that sees the run over also sees what this step did (`removed`).
   */
  afterRun?: (summary: IngestSummary) => Promise<IngestSummary>;
}

/** How often the run's status is rewritten while it runs. */
const RUN_STATUS_INTERVAL_MS = 1_000;

export class NatsIngest {
  readonly #rpc: NatsEngine;
  readonly #jobs: JobsClient;
  readonly #tasks: ParseTaskClient;
  readonly #options: NatsIngestOptions;

  private constructor(rpc: NatsEngine, jobs: JobsClient, tasks: ParseTaskClient, options: NatsIngestOptions) {
    this.#rpc = rpc;
    this.#jobs = jobs;
    this.#tasks = tasks;
    this.#options = options;
  }

  /** Sets up the jobs and ingest topology (idempotent). The connection stays the caller's. */
  static async open(nc: NatsConnection, options: NatsIngestOptions = {}): Promise<NatsIngest> {
    const topologyInput = { prefix: options.prefix ?? 'shoal', ...(options.replicas === undefined ? {} : { replicas: options.replicas }) };
    const topology = await withNatsRetry('set up the NATS topology', () => ensureTopology(nc, topologyInput));
    const jobs = await JobsClient.open(nc, { topology: topologyInput });
    const tasks = await ParseTaskClient.open(nc, topology, options.parse);
    const rpc = new NatsEngine(nc, { prefix: topologyInput.prefix, loadTimeoutMs: options.loadTimeoutMs ?? 30_000 });
    tasks.deadLetters.start();
    return new NatsIngest(rpc, jobs, tasks, options);
  }

  /**
   * The status of a run (null: no such run, or its status expired). A queued or running run whose
   * coordinator stopped sending heartbeats is marked failed (TIMEOUT, `abandoned_at`) here.
   */
  async status(runId: string): Promise<IngestRunStatus | null> {
    const entry = await this.#tasks.status.runEntry(checkJobId(runId));
    return entry === null ? null : settleAbandoned(this.#tasks.status, entry);
  }

  /**
   * Claims a run id for a run, `queued` (an HTTP caller reads it at once, then `run` it with the
   * lease): `{lease}` when this call owns it (new, or an abandoned run of the same content taken
   * over), `{existing}` for the same content already there; JOB_CONFLICT for other content.
   */
  claim(identity: RunIdentity, state: 'queued' | 'running' = 'queued'): Promise<RunClaim> {
    const status = { ...initialRun(checkJobId(identity.runId), identity.definition, identity.index, identity.total, state), content_hash: identity.contentHash };
    return RunLease.claim(this.#tasks.status, status, this.#options.heartbeatMs === undefined ? {} : { heartbeatMs: this.#options.heartbeatMs });
  }

  async #ownRun(run: NatsIngestRun, sources: readonly PendingSource[]): Promise<RunLease> {
    if (run.lease !== undefined) return run.lease;
    const runId = checkJobId(run.runId ?? randomUUID());
    const contentHash = runContentHash({ pipeline: run.definition, index: run.index, sources: sources.map((source) => source.uri), force: run.force === true });
    const claim = await this.claim({ runId, definition: run.definition, index: run.index, total: sources.length, contentHash }, 'running');
    if ('existing' in claim) throw new ShoalError(ErrorCode.JOB_CONFLICT, `ingest run ${runId} already exists (${claim.existing.state}); choose another run id`, { details: { job_id: runId, kind: 'ingest' } });
    return claim.lease;
  }

  async run(run: NatsIngestRun, sources: readonly PendingSource[]): Promise<IngestSummary> {
    const { definition, sink } = run;
    const lease = await this.#ownRun(run, sources);
    const runId = lease.status.job_id;
    const status: IngestRunStatus = { ...lease.status, state: 'running' };
    lease.start();
    const engine = new JobsEngine(this.#rpc, this.#jobs, {
      jobPrefix: runId,
      retryForMs: this.#options.retryForMs ?? 600_000,
      ...(this.#options.partItems === undefined ? {} : { partItems: this.#options.partItems }),
    });
    const { parse } = definition.stages;
    // Stops the runner when no parse worker came (the run then fails with the watchdog's UNAVAILABLE).
    const stalled = new AbortController();
    const reader = new RemoteParseReader(
      this.#tasks,
      runId,
      { ocr: parse.ocr, ocrModel: parse.ocrModel, ocrDpi: parse.ocrDpi, furniture: parse.furniture, maxBytes: parse.maxBytes, maxPages: parse.maxPages },
      {
        ...(this.#options.parseWorkerTimeoutMs === undefined ? {} : { failAfterMs: this.#options.parseWorkerTimeoutMs }),
        ...(this.#options.parseWarnAfterMs === undefined ? {} : { warnAfterMs: this.#options.parseWarnAfterMs }),
        ...(run.onWarning === undefined ? {} : { onWarning: run.onWarning }),
        onStalled: () => stalled.abort(),
      },
    );
    // A coordinator that lost its run (declared abandoned while it was cut off) stops: another one owns it now.
    const signal = AbortSignal.any([stalled.signal, lease.lost, ...(run.signal === undefined ? [] : [run.signal])]);
    const settings = settingsHash(definition);
    const states = await sink.states(sources.map((source) => source.uri));
    let unchanged = 0;
    reader.start(sources, (uri, documentId) => {
      const state = states.get(uri);
      const skip = run.force !== true && state?.document_id === documentId && state.settings === settings;
      if (skip) unchanged += 1;
      return skip;
    });
    let committed = 0;
    let lastWrite = 0;
    let latest: IngestProgress | null = null;
    const health = run.health ?? new StoreHealth();
    const current = (): IngestRunStatus => {
      const degraded = health.degraded;
      const documents = { total: sources.length, ok: committed, failed: reader.failed, unchanged };
      const counts = latest === null ? {} : { pages: latest.pages, ocr_pages: latest.ocrPages, chunks: latest.chunks };
      return { ...status, documents, ...counts, ...(degraded === null ? {} : { degraded }), updated_at: new Date().toISOString() };
    };
    const writeStatus = (): void => {
      lastWrite = performance.now();
      // A failed write is retried by the next one (the heartbeat rewrites the latest status).
      void lease.write(current()).catch(() => undefined);
    };
    const writeProgress = (progress: IngestProgress): void => {
      latest = progress;
      if (performance.now() - lastWrite >= RUN_STATUS_INTERVAL_MS) writeStatus();
    };
    // A store failing or answering again shows at once: progress stalls while the run waits on it.
    const unwatch = health.onChange(() => writeStatus());
    writeStatus();
    const runner = new IngestRunner({
      definition,
      engine,
      sink,
      reader,
      ...(run.force === undefined ? {} : { force: run.force }),
      signal,
      ...(run.onStage === undefined ? {} : { onStage: run.onStage }),
      ...(run.tableMetadata === undefined ? {} : { tableMetadata: run.tableMetadata }),
      onProgress: (progress) => {
        run.onProgress?.(progress);
        writeProgress(progress);
      },
      onEncoded: (uris) => reader.mark(uris.map((source) => ({ source, state: 'encoded' as const }))),
      onCommitted: async (committedStates) => {
        committed += committedStates.length;
        await reader.mark(committedStates.map((state) => ({ source: state.source, state: 'committed' as const, pages: state.pages, chunks: state.chunks })));
      },
    });
    try {
      const ran = await runner.run(sources);
      const summary = run.afterRun === undefined ? ran : await run.afterRun(ran);
      // No store change may rewrite the run as running after its final status.
      unwatch();
      await lease.finish(finalRun(status, summary));
      return summary;
    } catch (thrown) {
      unwatch();
      const error = reader.stalled ?? lease.lostReason ?? thrown;
      const shoal = toShoalError(error);
      // The run is over and waits on no store: a `degraded` mark kept here would stay on the
      // ended run for good (nothing clears it once the run stops); its error says why it failed.
      const { degraded: _over, ...ended } = current();
      if (lease.lostReason === null) await lease.finish({ ...ended, state: 'failed', error: { code: shoal.code, message: shoal.message.slice(0, 2048) } }).catch(() => undefined);
      throw error;
    } finally {
      lease.stop();
      unwatch();
      await reader.close();
    }
  }

  /** Closes the request-reply client; the connection stays the caller's. */
  async close(): Promise<void> {
    await this.#tasks.deadLetters.close();
    await this.#rpc.close();
  }
}

/** The content hash of a run: everything its submission decided, as canonical JSON (key order never matters). */
export function runContentHash(content: Record<string, unknown>): string {
  return canonicalHash(content);
}

function initialRun(runId: string, definition: PipelineDefinition, index: string, total: number, state: 'queued' | 'running'): IngestRunStatus {
  const now = new Date().toISOString();
  return {
    v: WIRE_VERSION,
    job_id: runId,
    kind: 'ingest',
    state,
    pipeline: definition.name.slice(0, 128),
    // Every worker, gateway and GET /v1/jobs reads the status: never a password from the URI.
    index: redactUri(index).slice(0, 4096),
    documents: { total, ok: 0, failed: 0, unchanged: 0 },
    pages: 0,
    ocr_pages: 0,
    chunks: 0,
    failed: [],
    created_at: now,
    updated_at: now,
  };
}

function finalRun(status: IngestRunStatus, summary: IngestSummary): IngestRunStatus {
  const { documents } = summary;
  const state = documents.failed === 0 ? 'completed' : documents.ok + documents.unchanged > 0 ? 'partial' : 'failed';
  return {
    ...status,
    state,
    documents,
    pages: summary.pages,
    ocr_pages: summary.ocrPages,
    chunks: summary.chunks,
    failed: summary.failed.slice(0, 20).map((failure) => ({ source: failure.source.slice(0, 4096), code: failure.code.slice(0, 64), reason: failure.reason.slice(0, 2048) })),
    ...(summary.removed === undefined ? {} : { removed: summary.removed }),
    updated_at: new Date().toISOString(),
  };
}
