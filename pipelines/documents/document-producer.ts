import { DeliverPolicy, jetstream, jetstreamManager, type JetStreamClient } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { DocumentLedger } from '../../adapters/nats/documents/ledger.js';
import { ensureDocumentTopology, type DocumentTopology } from '../../adapters/nats/documents/topology.js';
import { withNatsRetry } from '../../adapters/nats/connection/nats-retry.js';
import { PayloadStore } from '../../adapters/nats/connection/payloads.js';
import { ensureTopology, type TopologySettingsInput } from '../../adapters/nats/connection/topology.js';
import { DocumentEvent, DocumentJob, RunEvent, documentMessageId, type DocumentJobSource } from '../../adapters/protocol/documents.js';
import { ErrorCode, ShoalError } from '../../adapters/protocol/errors.js';
import type { IngestRunStatus } from '../../adapters/protocol/ingest.js';
import { WIRE_VERSION } from '../../adapters/protocol/jobs.js';
import { checkJobId } from '../../adapters/protocol/subjects.js';
import { parseWith } from '../../adapters/protocol/validate.js';
import type { IngestSummary } from './summary.js';
import type { PendingSource } from './sources.js';

/**
 * The producer side of document jobs (`shoal ingest --nats --index NAME`, `POST /v1/ingest`,
 * `shoal runs watch`): no process coordinates a run. A producer lists the sources, makes each
 * reachable by the workers (a local file's bytes go to the object store, `obj://`, keeping its
 * path as the document's source; `s3://` objects are named as they are; inline text travels in
 * the message), publishes one document job each, records the run's size in its status, and may
 * then follow the run's events from the events stream, from any process. Killing it after the
 * publish loses nothing: the jobs wait in the work queue and the workers end the run.
 */

/** Inline text above this many bytes goes through the object store (a NATS message holds 1 MiB by default). */
const MAX_INLINE_BYTES = 512 * 1024;

export interface ProducedRun {
  runId: string;
  pipeline: string;
  index: string;
  documents: number;
}

export interface FollowProgress {
  total: number;
  ended: number;
  ok: number;
  failed: number;
  unchanged: number;
  pages: number;
  ocrPages: number;
  chunks: number;
}

export interface FollowOptions {
  signal?: AbortSignal;
  onEvent?: (event: DocumentEvent, progress: FollowProgress) => void;
  /** The run's size when the caller knows it (for progress before the status is read). */
  expected?: number;
}

export interface FollowedRun {
  summary: IngestSummary;
  /** The run's end event; null when the follow was stopped first. */
  end: RunEvent | null;
  events: DocumentEvent[];
}

export class DocumentProducer {
  readonly #nc: NatsConnection;
  readonly #js: JetStreamClient;
  readonly #topology: DocumentTopology;
  readonly #ledger: DocumentLedger;
  readonly #payloads: PayloadStore;

  private constructor(nc: NatsConnection, topology: DocumentTopology, ledger: DocumentLedger, payloads: PayloadStore) {
    this.#nc = nc;
    this.#js = jetstream(nc);
    this.#topology = topology;
    this.#ledger = ledger;
    this.#payloads = payloads;
  }

  /** Sets up the topology (streams, the ledger's bucket; consumers stay the workers'). The connection stays the caller's. */
  static async open(nc: NatsConnection, topologySettings: TopologySettingsInput = {}): Promise<DocumentProducer> {
    const topology = await withNatsRetry('set up the NATS topology', () => ensureTopology(nc, topologySettings));
    // A replicated stream's creation can time out while a cluster is busy electing: retried, as every NATS call of a run is.
    const documents = await withNatsRetry('set up the document-job topology', () => ensureDocumentTopology(nc, topology, []));
    const ledger = await DocumentLedger.open(nc, documents.ingest.bucket);
    return new DocumentProducer(nc, documents, ledger, new PayloadStore(nc, { bucket: topology.names.payloadBucket }));
  }

  get names(): DocumentTopology['names'] {
    return this.#topology.names;
  }

  /** What a worker reads for `pending`: its bytes in the object store, its source kept as the document's `source`. */
  async #stage(runId: string, n: number, pending: PendingSource): Promise<DocumentJobSource> {
    // An S3 object is read by the worker itself (and only when it changed), never copied here.
    if (pending.uri.startsWith('s3://')) return { uri: pending.uri };
    const loaded = await pending.load();
    if (loaded.source.text !== undefined && loaded.bytes.byteLength <= MAX_INLINE_BYTES) return { id: pending.uri, text: loaded.source.text };
    const ref = await withNatsRetry(`store document ${n} of run ${runId}`, () => this.#payloads.put(`documents/${runId}/${n}`, loaded.bytes));
    return { uri: ref, id: pending.uri };
  }

  /**
   * Publishes one job per source (doc keys `0`, `1`, ...), then records the run's size in its
   * status, which makes the run end once that many documents ended. Publishing again with the
   * same run id is deduplicated by message id within the window, and answered from the ledger after it.
   */
  async publish(run: {
    runId: string;
    pipeline: string;
    index: string;
    sources: readonly PendingSource[];
    /** Per source, a reference the workers read themselves (`obj://`, `s3://`, `file://` in shared roots): published as it is, not copied. */
    references?: readonly (DocumentJobSource | null)[];
    metadata?: DocumentJob['metadata'];
    /** Recorded in the run's status: what its submission decided (a resubmission with other content is a conflict). */
    contentHash?: string;
  }): Promise<ProducedRun> {
    const runId = checkJobId(run.runId);
    const subject = this.#topology.names.subject(run.pipeline);
    let n = 0;
    // A few documents staged and published at once: the object store and the stream answer in parallel.
    const window = 16;
    const inFlight = new Set<Promise<void>>();
    for (const pending of run.sources) {
      const doc = String(n);
      const at = n++;
      const task = (async () => {
        const source = run.references?.[at] ?? (await this.#stage(runId, at, pending));
        // A source's own metadata (a stdin record's) over the run's.
        const metadata = run.metadata === undefined && pending.metadata === undefined ? undefined : { ...run.metadata, ...pending.metadata };
        const job = parseWith(DocumentJob, { v: WIRE_VERSION, run_id: runId, doc, source, pipeline: run.pipeline, index: run.index, ...(metadata === undefined ? {} : { metadata }), submitted_at: new Date().toISOString() }, 'document job', ErrorCode.INVALID_INPUT);
        await withNatsRetry(`publish document ${doc} of run ${runId}`, () => this.#js.publish(subject, JSON.stringify(job), { msgID: documentMessageId(runId, doc), expect: { streamName: this.#topology.names.stream } }));
      })();
      inFlight.add(task);
      void task.finally(() => inFlight.delete(task)).catch(() => undefined);
      if (inFlight.size >= window) await Promise.race(inFlight);
    }
    await Promise.all(inFlight);
    await this.announce(runId, n, run.pipeline, run.index, run.contentHash);
    return { runId, pipeline: run.pipeline, index: run.index, documents: n };
  }

  /** Records how many documents the run has (the producer's own count); the run ends once that many ended. */
  async announce(runId: string, expected: number, pipeline: string, index: string, contentHash?: string): Promise<IngestRunStatus> {
    const outcome = await withNatsRetry(`announce run ${runId}`, () => this.#ledger.announce({ v: WIRE_VERSION, run_id: runId, expected, pipeline, index }, { pipeline, index, ...(contentHash === undefined ? {} : { contentHash }) }));
    // A run whose documents all ended before the announcement ends now: its end event is published here.
    if (outcome.ended !== null) {
      const ended = outcome.ended;
      await withNatsRetry(`publish the end of run ${runId}`, () => this.#js.publish(this.#topology.names.runEvents(runId), JSON.stringify(ended), { msgID: `run.${runId}`, expect: { streamName: this.#topology.names.eventsStream } }));
    }
    return outcome.status;
  }

  /**
   * Whether some documents worker serves `pipeline` now: its consumer exists and has a pull
   * waiting or jobs delivered and not acked (what a worker's fetch loop leaves).
   */
  async hasWorker(pipeline: string): Promise<boolean> {
    try {
      const info = await (await jetstreamManager(this.#nc)).consumers.info(this.#topology.names.stream, this.#topology.names.consumer(pipeline));
      return info.num_waiting > 0 || info.num_ack_pending > 0;
    } catch {
      return false;
    }
  }

  /** The run's status (null: no such run, or expired). */
  async status(runId: string): Promise<IngestRunStatus | null> {
    return (await this.#ledger.run(checkJobId(runId)))?.status ?? null;
  }

  /**
   * Follows a run from its first event (the events stream keeps them 7 days), from any process:
   * each document's terminal event once, until the run's end event (or `signal`).
   */
  async follow(runId: string, options: FollowOptions = {}): Promise<FollowedRun> {
    checkJobId(runId);
    const started = performance.now();
    const byDoc = new Map<string, DocumentEvent>();
    const progress: FollowProgress = { total: options.expected ?? 0, ended: 0, ok: 0, failed: 0, unchanged: 0, pages: 0, ocrPages: 0, chunks: 0 };
    let end: RunEvent | null = null;
    const consumer = await this.#js.consumers.get(this.#topology.names.eventsStream, { filter_subjects: `${this.#topology.names.allEvents().slice(0, -1)}*.${runId}`, deliver_policy: DeliverPolicy.All });
    const messages = await consumer.consume();
    const stop = (): void => void messages.close();
    options.signal?.addEventListener('abort', stop, { once: true });
    // The run's size may only be known from its status (a run announced by another producer).
    const status = await this.status(runId);
    if (status?.expected !== undefined) progress.total = status.expected;
    try {
      if (options.signal?.aborted !== true) {
        for await (const msg of messages) {
          if (msg.subject === this.#topology.names.runEvents(runId)) {
            const parsed = RunEvent.safeParse(msg.json());
            if (parsed.success) {
              end = parsed.data;
              progress.total = Math.max(progress.total, end.documents.total);
            }
          } else {
            const parsed = DocumentEvent.safeParse(msg.json());
            if (parsed.success && !byDoc.has(parsed.data.doc)) {
              const event = parsed.data;
              byDoc.set(event.doc, event);
              progress.ended += 1;
              if (event.state === 'committed') progress.ok += 1;
              else if (event.state === 'unchanged') progress.unchanged += 1;
              else progress.failed += 1;
              progress.pages += event.pages;
              progress.ocrPages += event.ocr_pages ?? 0;
              progress.chunks += event.chunks;
              progress.total = Math.max(progress.total, progress.ended);
              options.onEvent?.(event, { ...progress });
            }
          }
          if (end !== null && progress.ended >= end.documents.total) break;
        }
      }
    } finally {
      options.signal?.removeEventListener('abort', stop);
      await messages.close().catch(() => undefined);
    }
    const events = [...byDoc.values()];
    const failed = events.filter((event) => event.state === 'failed').map((event) => ({ source: event.source, code: event.code ?? ErrorCode.INTERNAL, reason: event.reason ?? '' }));
    const summary: IngestSummary = {
      documents: { total: progress.total, ok: progress.ok, failed: progress.failed, unchanged: progress.unchanged },
      failed,
      pages: progress.pages,
      ocrPages: progress.ocrPages,
      chunks: progress.chunks,
      seconds: (performance.now() - started) / 1000,
    };
    return { summary, end, events };
  }

  close(): void {
    this.#payloads.close();
  }
}

/** Refusal of producer-mode options a document job cannot carry (it names a pipeline, nothing else). */
export function notCarried(option: string): ShoalError {
  return new ShoalError(ErrorCode.INVALID_INPUT, `${option} cannot travel with a document job (a job names a pipeline and an index, nothing else): put it in a pipeline file of the workers' SHOAL_PIPELINES folder and give --pipeline NAME`);
}
