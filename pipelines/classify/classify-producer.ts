import type { Readable } from 'node:stream';
import { jetstream, jetstreamManager, type JetStreamClient } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { ClassifyLedger, newClassifyRecord } from '../../adapters/nats/classify/ledger.js';
import { ensureClassifyTopology, type ClassifyTopology } from '../../adapters/nats/classify/topology.js';
import { withNatsRetry } from '../../adapters/nats/connection/nats-retry.js';
import { PayloadStore, type PayloadStoreOptions } from '../../adapters/nats/connection/payloads.js';
import { ensureTopology, type TopologySettingsInput } from '../../adapters/nats/connection/topology.js';
import type { ClassifyMethod } from '../../adapters/protocol/classify.js';
import {
  ClassifyChunk,
  ClassifyJobSpec,
  ClassifyRunEnd,
  DEFAULT_CHUNK_ITEMS,
  MAX_CHUNK_ITEMS,
  MAX_CLASSIFY_CHUNKS,
  classifyChunkMessageId,
  classifyEndMessageId,
  type ClassifyChunkItem,
  type ClassifyJobNames,
  type ClassifyJobRecord,
} from '../../adapters/protocol/classify-jobs.js';
import { ErrorCode, ShoalError } from '../../adapters/protocol/errors.js';
import { WIRE_VERSION } from '../../adapters/protocol/jobs.js';
import { checkJobId } from '../../adapters/protocol/subjects.js';
import { parseWith } from '../../adapters/protocol/validate.js';
import { pause } from '../../adapters/support/abortable.js';

/**
 * The producer side of classification jobs (`shoal classify --nats`, `POST /v1/classify` with
 * SHOAL_CLASSIFY_JOBS): no process coordinates a run. A producer stores the run's spec once,
 * records the run's status, publishes the catalog as chunk messages and then the end message,
 * and may follow the status (KV, from any process) and read the results from the run's target.
 * Stopping it after the publish loses nothing: the chunks wait in the work queue, and the classify
 * workers complete the run. Publishing a run again (same id) is deduplicated by message id within
 * the window, and by the status's counted chunks after it.
 */

/** Chunk messages above this many bytes carry their products by reference (a NATS message holds 1 MiB by default). */
const MAX_INLINE_CHUNK_BYTES = 512 * 1024;
/** Chunks published at once. */
const PUBLISH_WINDOW = 16;
const FOLLOW_INTERVAL_MS = 250;

export interface ClassifyRunInput {
  runId: string;
  /** The method: model, taxonomy text or labels, settings (the spec). */
  request: ClassifyMethod;
  /** The catalog's products, in catalog order. */
  items: Iterable<ClassifyChunkItem> | AsyncIterable<ClassifyChunkItem>;
  /** Where the results go. @default `obj://<p>_payloads/classify/<run>/results.jsonl` */
  result?: string | undefined;
  /** Products per chunk. @default 256 */
  chunkItems?: number;
  /** The catalog's size when known before publishing (shown in the status from the start). */
  knownItems?: number;
  /** Recorded in the status: a resubmission of the id with other content is a conflict. */
  contentHash?: string;
  /** Told after each chunk is published (products so far). */
  onPublished?: (items: number, chunks: number) => void;
}

export interface PublishedRun {
  runId: string;
  chunks: number;
  items: number;
  result: string;
}

export interface FollowClassifyOptions {
  signal?: AbortSignal;
  onStatus?: (record: ClassifyJobRecord) => void;
  /** @default 250 */
  intervalMs?: number;
}

export class ClassifyProducer {
  readonly #nc: NatsConnection;
  readonly #js: JetStreamClient;
  readonly #topology: ClassifyTopology;
  readonly #ledger: ClassifyLedger;
  readonly #payloads: PayloadStore;

  private constructor(nc: NatsConnection, topology: ClassifyTopology, ledger: ClassifyLedger, payloads: PayloadStore) {
    this.#nc = nc;
    this.#js = jetstream(nc);
    this.#topology = topology;
    this.#ledger = ledger;
    this.#payloads = payloads;
  }

  /**
   * Sets up the topology (the stream, the status bucket; the consumer stays the workers'). The
   * connection stays the caller's; `payloads` (file roots, S3) decide which result targets this
   * producer may read back.
   */
  static async open(nc: NatsConnection, topologySettings: TopologySettingsInput = {}, payloads: Omit<PayloadStoreOptions, 'bucket'> = {}): Promise<ClassifyProducer> {
    const topology = await withNatsRetry('set up the NATS topology', () => ensureTopology(nc, topologySettings));
    const classify = await withNatsRetry('set up the classification topology', () => ensureClassifyTopology(nc, topology));
    const ledger = await ClassifyLedger.open(nc, classify.ingest.bucket);
    return new ClassifyProducer(nc, classify, ledger, new PayloadStore(nc, { ...payloads, bucket: topology.names.payloadBucket }));
  }

  get names(): ClassifyJobNames {
    return this.#topology.names;
  }

  /** Where a run's results go when it names no target. */
  defaultResult(runId: string): string {
    return `obj://${this.#payloads.bucket}/${this.#topology.names.resultsObject(runId)}`;
  }

  /** Refuses a result target the workers could not write (a bucket that does not exist, one not allowed), before anything is published. */
  async checkTarget(uri: string): Promise<void> {
    await this.#payloads.checkTarget(uri);
  }

  /** Stores the spec, records the run, publishes its chunks and its end. */
  async publish(run: ClassifyRunInput): Promise<PublishedRun> {
    const runId = checkJobId(run.runId);
    const chunkItems = Math.min(MAX_CHUNK_ITEMS, Math.max(1, run.chunkItems ?? DEFAULT_CHUNK_ITEMS));
    const names = this.#topology.names;
    const spec = parseWith(ClassifyJobSpec, { v: WIRE_VERSION, request: run.request, ...(run.result === undefined ? {} : { result: run.result }), created_at: new Date().toISOString() }, 'classification spec', ErrorCode.INVALID_INPUT);
    const specRef = await withNatsRetry(`store the spec of run ${runId}`, () => this.#payloads.put(names.specObject(runId), new TextEncoder().encode(JSON.stringify(spec))));
    const result = run.result ?? this.defaultResult(runId);
    // Created before the first chunk, so the run is `queued` for every reader from now on; a
    // record there already (a resubmission, or a worker that was quicker) is left as it is.
    await withNatsRetry(`record run ${runId}`, () => this.#ledger.create(newClassifyRecord(runId, { model: run.request.model, specRef, result }, new Date().toISOString(), run.knownItems ?? 0, run.contentHash)));
    const inFlight = new Set<Promise<void>>();
    let chunk = 0;
    let items = 0;
    let batch: ClassifyChunkItem[] = [];
    const send = async (products: ClassifyChunkItem[], at: number, firstIndex: number): Promise<void> => {
      const message = await this.#chunkMessage(runId, at, specRef, firstIndex, products);
      await withNatsRetry(`publish chunk ${at} of run ${runId}`, () => this.#js.publish(names.chunks, message, { msgID: classifyChunkMessageId(runId, at), expect: { streamName: names.stream } }));
    };
    const flush = async (): Promise<void> => {
      if (batch.length === 0) return;
      if (chunk >= MAX_CLASSIFY_CHUNKS) throw new ShoalError(ErrorCode.INPUT_TOO_LARGE, `a classification run has at most ${MAX_CLASSIFY_CHUNKS} chunks (${MAX_CLASSIFY_CHUNKS * chunkItems} products at ${chunkItems} a chunk)`);
      const task = send(batch, chunk, items);
      items += batch.length;
      chunk += 1;
      batch = [];
      inFlight.add(task);
      void task.finally(() => inFlight.delete(task)).catch(() => undefined);
      if (inFlight.size >= PUBLISH_WINDOW) await Promise.race(inFlight);
      run.onPublished?.(items, chunk);
    };
    try {
      for await (const item of run.items) {
        batch.push(item);
        if (batch.length >= chunkItems) await flush();
      }
      await flush();
    } finally {
      await Promise.allSettled(inFlight);
    }
    await Promise.all(inFlight);
    if (chunk === 0) throw new ShoalError(ErrorCode.INVALID_INPUT, 'the catalog has no products: nothing to classify');
    const end = parseWith(ClassifyRunEnd, { v: WIRE_VERSION, run_id: runId, spec_ref: specRef, chunks: chunk, items, submitted_at: new Date().toISOString() }, 'classification run end', ErrorCode.INTERNAL);
    await withNatsRetry(`publish the end of run ${runId}`, () => this.#js.publish(names.end, JSON.stringify(end), { msgID: classifyEndMessageId(runId), expect: { streamName: names.stream } }));
    return { runId, chunks: chunk, items, result };
  }

  async #chunkMessage(runId: string, chunk: number, specRef: string, firstIndex: number, products: ClassifyChunkItem[]): Promise<string> {
    const base = { v: WIRE_VERSION, run_id: runId, chunk, spec_ref: specRef, first_index: firstIndex, submitted_at: new Date().toISOString() };
    const inline = JSON.stringify(parseWith(ClassifyChunk, { ...base, items: products }, 'classification chunk', ErrorCode.INVALID_INPUT));
    if (Buffer.byteLength(inline) <= MAX_INLINE_CHUNK_BYTES) return inline;
    const name = this.#topology.names.itemsObject(runId, chunk);
    const ref = await withNatsRetry(`store the products of chunk ${chunk} of run ${runId}`, () => this.#payloads.put(name, new TextEncoder().encode(JSON.stringify(products))));
    return JSON.stringify({ ...base, items_ref: ref });
  }

  /**
   * Fails a run its producer could not publish whole (a bad line mid-catalog): without its end it
   * could never complete, and its status says why instead of `running` for good.
   */
  async abandon(runId: string, error: { code: string; message: string }): Promise<void> {
    const found = await this.#ledger.get(checkJobId(runId));
    if (found === null) return;
    const { record } = found;
    await this.#ledger.fail(runId, error, { model: record.model, specRef: record.spec_ref, result: record.result });
  }

  /** The run's status as the workers keep it (null: no such run, or expired). */
  async status(runId: string): Promise<ClassifyJobRecord | null> {
    return (await this.#ledger.get(checkJobId(runId)))?.record ?? null;
  }

  /** Follows the run's status (from any process) until it is completed or failed, or `signal` aborts (then the last status read). */
  async follow(runId: string, options: FollowClassifyOptions = {}): Promise<ClassifyJobRecord | null> {
    let last: ClassifyJobRecord | null = null;
    let seen = '';
    while (options.signal?.aborted !== true) {
      last = await withNatsRetry(`read run ${runId}`, () => this.status(runId), options.signal === undefined ? {} : { signal: options.signal });
      if (last !== null && last.updated_at !== seen) {
        seen = last.updated_at;
        options.onStatus?.(last);
      }
      if (last?.state === 'completed' || last?.state === 'failed') return last;
      try {
        await pause(options.intervalMs ?? FOLLOW_INTERVAL_MS, options.signal, 'stopped following');
      } catch {
        break;
      }
    }
    return last;
  }

  /** A completed run's results (JSON Lines, catalog order), as a stream from its target. */
  async results(record: ClassifyJobRecord): Promise<Readable> {
    if (record.state !== 'completed') throw new ShoalError(ErrorCode.UNAVAILABLE, `run ${record.job_id} is ${record.state}: its results are written once it is completed`, { details: { job_id: record.job_id, state: record.state } });
    return this.#payloads.openRead(record.result);
  }

  /**
   * Whether some classify worker pulls now: the consumer exists and has a pull waiting or
   * messages delivered and not acked.
   */
  async hasWorker(): Promise<boolean> {
    try {
      const info = await (await jetstreamManager(this.#nc)).consumers.info(this.#topology.names.stream, this.#topology.names.consumer);
      return info.num_waiting > 0 || info.num_ack_pending > 0;
    } catch {
      return false;
    }
  }

  close(): void {
    this.#payloads.close();
  }
}
