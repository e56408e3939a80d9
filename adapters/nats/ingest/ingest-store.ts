import { AckPolicy, DeliverPolicy, DiscardPolicy, RetentionPolicy, StorageType } from '@nats-io/jetstream';
import { Kvm, type KV, type KvEntry } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/transport-node';
import { ErrorCode, ShoalError } from '../../protocol/errors.js';
import { DocumentStatus, IngestRunStatus } from '../../protocol/ingest.js';
import { checkJobId, type NatsNames } from '../../protocol/subjects.js';
import { parseWith } from '../../protocol/validate.js';
import { writeIfRevision } from '../connection/kv-cas.js';
import { JS_CODES, isConcurrentCreate, isJsApiCode, toNatsShoalError } from '../connection/nats-errors.js';
import { STREAM_BYTES_CEILING, createAutoSized, explicitSizeRefused, isNoRoom } from '../connection/stream-sizing.js';
import { createBucket, reservingStreams, type Topology } from '../connection/topology.js';

/**
 * What document ingest adds to the NATS topology (docs/ingest.md, "Over NATS"), beside the jobs
 * topology it builds on:
 * - `<P>_INGEST`: a work-queue stream of parse tasks, `<prefix>.ingest.parse`, with one durable
 *   pull consumer shared by every parse worker (`<p>_ingest_parse`);
 * - the `<p>_ingest` KV bucket: per-document status (`doc.<run>.<n>`) and per-run status
 *   (`run.<run>`). A document's status is written whole. The coordinator writes it `queued`
 *   naming its task (the digest of the task's token) and later `encoded`/`committed`; a parse
 *   worker writes its answer only by compare-and-set over that `queued` status of the same task
 *   (parse-task-standing.ts), so a task someone else published under the run id, or an earlier
 *   coordinator's task, never overwrites the answer: the bucket keeps one value per key, and a
 *   value overwritten right after it was written is never delivered to the coordinator's watch.
 *   A run's status is created with a KV create and then changed only by compare-and-set
 *   (createRun/updateRun, owned by pipelines/documents/run-lease.ts).
 */

const SECOND_NS = 1_000_000_000;

export interface IngestNames {
  stream: string;
  parseSubject: string;
  parseConsumer: string;
  bucket: string;
  /** Where poison parse tasks go (in the jobs topology's dead-letter stream, `<prefix>.dlq.>`). */
  deadLetterSubject: string;
  deadLetterStream: string;
  /** The server's max-deliveries advisories of the parse consumer, kept durably (as topology.ts does for jobs). */
  advisoryStream: string;
  advisorySubject: string;
  advisoryConsumer: string;
}

export function ingestNames(names: NatsNames): IngestNames {
  const lower = names.statusBucket.replace(/_jobs$/, '');
  const stream = names.jobsStream.replace(/_JOBS$/, '_INGEST');
  return Object.freeze({
    stream,
    parseSubject: `${names.prefix}.ingest.parse`,
    parseConsumer: `${lower}_ingest_parse`,
    bucket: `${lower}_ingest`,
    deadLetterSubject: `${names.prefix}.dlq.ingest.parse`,
    deadLetterStream: names.deadLetterStream,
    advisoryStream: `${stream}_MAX_DELIVERIES`,
    advisorySubject: `$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.${stream}.*`,
    advisoryConsumer: 'dead_letters',
  });
}

export interface ParseConsumerSettings {
  /** Time a worker has to finish a parse task before it is redelivered (working() extends it). @default 30000 */
  ackWaitMs?: number;
  /** Deliveries before the document is marked failed. @default 5 */
  maxDeliver?: number;
}

/**
 * Creates (idempotently) the parse stream, its consumer and the ingest KV bucket. `given`
 * given (a parse worker's own settings): an existing consumer is updated to them; left out (a
 * coordinator): an existing consumer is kept as the workers set it, so a coordinator starting
 * after them does not reset their ack wait or max deliveries to the defaults.
 */
export async function ensureIngestTopology(nc: NatsConnection, topology: Topology, given?: ParseConsumerSettings): Promise<IngestNames> {
  const consumer = given ?? {};
  const names = ingestNames(topology.names);
  const { settings, jsm } = topology;
  const storage = settings.storage === 'file' ? StorageType.File : StorageType.Memory;
  try {
    await ensureIngestStream(jsm, topology, names, storage);
    const config = {
      durable_name: names.parseConsumer,
      filter_subject: names.parseSubject,
      ack_policy: AckPolicy.Explicit,
      deliver_policy: DeliverPolicy.All,
      ack_wait: (consumer.ackWaitMs ?? 30_000) * 1_000_000,
      max_deliver: consumer.maxDeliver ?? 5,
    };
    try {
      const info = await jsm.consumers.info(names.stream, names.parseConsumer);
      if (given !== undefined && (info.config.ack_wait !== config.ack_wait || info.config.max_deliver !== config.max_deliver)) {
        await jsm.consumers.update(names.stream, names.parseConsumer, { ack_wait: config.ack_wait, max_deliver: config.max_deliver });
      }
    } catch (error) {
      if (!isJsApiCode(error, JS_CODES.ConsumerNotFound)) throw error;
      await jsm.consumers.add(names.stream, config);
    }
    await ensureAdvisoryStream(jsm, names, settings.deadLetterMaxAgeSeconds, storage, settings.replicas);
    await createBucket(() => new Kvm(nc).create(names.bucket, { history: 1, ttl: settings.statusMaxAgeSeconds * 1000, storage, replicas: settings.replicas }));
  } catch (error) {
    throw toNatsShoalError(error, 'set up the NATS ingest topology');
  }
  return names;
}

/**
 * The parse stream, created when missing and never updated (its users may create it, not update
 * it). Its size is jobsMaxBytes when set, else the jobs stream's (sized from the store, which kept
 * a share for this stream when it made the jobs stream; stream-sizing.ts).
 */
async function ensureIngestStream(jsm: Topology['jsm'], topology: Topology, names: IngestNames, storage: StorageType): Promise<void> {
  const { settings } = topology;
  try {
    await jsm.streams.info(names.stream);
    return;
  } catch (error) {
    if (!isJsApiCode(error, JS_CODES.StreamNotFound)) throw error;
  }
  const spec = {
    name: names.stream,
    subjects: [names.parseSubject],
    retention: RetentionPolicy.Workqueue,
    storage,
    num_replicas: settings.replicas,
    discard: DiscardPolicy.New,
    max_age: settings.jobsMaxAgeSeconds * SECOND_NS,
    duplicate_window: settings.duplicateWindowSeconds * SECOND_NS,
  };
  const own = reservingStreams(topology.names);
  if (settings.jobsMaxBytes === undefined) {
    // Read now, not from the topology: a service that raced another to create the jobs stream may have seen its probe size.
    const jobs = (await jsm.streams.info(topology.names.jobsStream)).config.max_bytes;
    await createAutoSized(jsm, spec, { shares: 1, ceiling: jobs > 0 ? Math.min(jobs, STREAM_BYTES_CEILING) : STREAM_BYTES_CEILING, streams: own });
    return;
  }
  try {
    await jsm.streams.add({ ...spec, max_bytes: settings.jobsMaxBytes });
  } catch (error) {
    if (isNoRoom(error)) throw await explicitSizeRefused(jsm, { ...spec, max_bytes: settings.jobsMaxBytes }, 'jobsMaxBytes', error);
    if (!isConcurrentCreate(error)) throw error;
  }
}

/** The stream and durable consumer that keep the parse consumer's max-deliveries advisories. */
async function ensureAdvisoryStream(jsm: Topology['jsm'], names: IngestNames, maxAgeSeconds: number, storage: StorageType, replicas: number): Promise<void> {
  try {
    await jsm.streams.info(names.advisoryStream);
  } catch (error) {
    if (!isJsApiCode(error, JS_CODES.StreamNotFound)) throw error;
    await jsm.streams
      .add({
        name: names.advisoryStream,
        subjects: [names.advisorySubject],
        retention: RetentionPolicy.Workqueue,
        storage,
        num_replicas: replicas,
        discard: DiscardPolicy.Old,
        max_age: maxAgeSeconds * SECOND_NS,
        duplicate_window: 60 * SECOND_NS,
      })
      .catch((added: unknown) => {
        if (!isConcurrentCreate(added)) throw added;
      });
  }
  try {
    await jsm.consumers.info(names.advisoryStream, names.advisoryConsumer);
  } catch (error) {
    if (!isJsApiCode(error, JS_CODES.ConsumerNotFound)) throw error;
    // An identical durable consumer added twice is a no-op on the server.
    await jsm.consumers.add(names.advisoryStream, {
      durable_name: names.advisoryConsumer,
      ack_policy: AckPolicy.Explicit,
      deliver_policy: DeliverPolicy.All,
      ack_wait: 30 * SECOND_NS,
      max_deliver: -1,
    });
  }
}

const docKey = (run: string, doc: number): string => `doc.${checkJobId(run)}.${doc}`;
const runKey = (run: string): string => `run.${checkJobId(run)}`;

function decodeEntry<T>(entry: KvEntry, parse: (value: unknown) => T): T {
  let value: unknown;
  try {
    value = entry.json();
  } catch (error) {
    throw new ShoalError(ErrorCode.INTERNAL, `ingest status ${entry.key} is not JSON`, { cause: error });
  }
  return parse(value);
}

const parseDocument = (value: unknown): DocumentStatus => parseWith(DocumentStatus, value, 'document status', ErrorCode.INTERNAL);
const parseRun = (value: unknown): IngestRunStatus => parseWith(IngestRunStatus, value, 'ingest run status', ErrorCode.INTERNAL);

/** A run's status as stored, with the KV revision a compare-and-set write names. */
export interface RunEntry {
  status: IngestRunStatus;
  revision: number;
}

/** A document's status as stored, with its KV revision. */
export interface DocumentEntry {
  status: DocumentStatus;
  revision: number;
}

/** Per-document and per-run ingest status in the KV bucket. */
export class IngestStatusStore {
  readonly #kv: KV;

  private constructor(kv: KV) {
    this.#kv = kv;
  }

  static async open(nc: NatsConnection, bucket: string): Promise<IngestStatusStore> {
    try {
      return new IngestStatusStore(await new Kvm(nc).open(bucket));
    } catch (error) {
      throw toNatsShoalError(error, `open the ingest status bucket ${bucket}`);
    }
  }

  /** The key's value (parsed) with its KV revision, null when it has none. */
  async #entry<T>(key: string, parse: (value: unknown) => T): Promise<{ value: T; revision: number } | null> {
    let entry: KvEntry | null;
    try {
      entry = await this.#kv.get(key);
    } catch (error) {
      throw toNatsShoalError(error, `read ingest status ${key}`);
    }
    return entry === null || entry.operation !== 'PUT' ? null : { value: decodeEntry(entry, parse), revision: entry.revision };
  }

  async #get<T>(key: string, parse: (value: unknown) => T): Promise<T | null> {
    return (await this.#entry(key, parse))?.value ?? null;
  }

  async #put(key: string, value: unknown): Promise<void> {
    try {
      await this.#kv.put(key, JSON.stringify(value));
    } catch (error) {
      throw toNatsShoalError(error, `write ingest status ${key}`);
    }
  }

  document(run: string, doc: number): Promise<DocumentStatus | null> {
    return this.#get(docKey(run, doc), parseDocument);
  }

  putDocument(status: DocumentStatus): Promise<void> {
    return this.#put(docKey(status.run_id, status.doc), parseDocument(status));
  }

  /** The document's status with its KV revision (for compare-and-set), null when it has none. */
  async documentEntry(run: string, doc: number): Promise<DocumentEntry | null> {
    const found = await this.#entry(docKey(run, doc), parseDocument);
    return found === null ? null : { status: found.value, revision: found.revision };
  }

  /** Compare-and-set write of a document's status at `revision`: false when it is no longer the latest. */
  updateDocument(status: DocumentStatus, revision: number): Promise<boolean> {
    const key = docKey(status.run_id, status.doc);
    return writeIfRevision(this.#kv, key, JSON.stringify(parseDocument(status)), revision, `write ingest status ${key}`);
  }

  run(run: string): Promise<IngestRunStatus | null> {
    return this.#get(runKey(run), parseRun);
  }

  /** The run's status with its KV revision (for compare-and-set), null when it has none. */
  async runEntry(run: string): Promise<RunEntry | null> {
    const found = await this.#entry(runKey(run), parseRun);
    return found === null ? null : { status: found.value, revision: found.revision };
  }

  /**
   * Creates the run's status unless one exists: the one atomic decision between concurrent
   * submissions of one run id (KV create). Returns the new revision, or what is stored.
   */
  async createRun(status: IngestRunStatus): Promise<{ created: true; revision: number } | { created: false; existing: RunEntry }> {
    const key = runKey(status.job_id);
    try {
      return { created: true, revision: await this.#kv.create(key, JSON.stringify(parseRun(status))) };
    } catch (error) {
      if (!isJsApiCode(error, JS_CODES.StreamWrongLastSequence)) throw toNatsShoalError(error, `create ingest status ${key}`);
    }
    const existing = await this.runEntry(status.job_id);
    if (existing === null) throw new ShoalError(ErrorCode.UNAVAILABLE, `ingest status ${key} changed while it was created; retry`);
    return { created: false, existing };
  }

  /** Compare-and-set write of the run's status: the new revision, or null when `revision` is no longer the latest. */
  async updateRun(status: IngestRunStatus, revision: number): Promise<number | null> {
    const key = runKey(status.job_id);
    try {
      return await this.#kv.update(key, JSON.stringify(parseRun(status)), revision);
    } catch (error) {
      if (isJsApiCode(error, JS_CODES.StreamWrongLastSequence)) return null;
      throw toNatsShoalError(error, `write ingest status ${key}`);
    }
  }

  /**
   * Every document status of a run as it is written, from the current values on; ends when
   * `signal` aborts. A value that does not parse is skipped (it cannot be ours).
   */
  async *watchDocuments(run: string, signal: AbortSignal): AsyncGenerator<DocumentStatus> {
    let watcher;
    try {
      watcher = await this.#kv.watch({ key: `doc.${checkJobId(run)}.>` });
    } catch (error) {
      throw toNatsShoalError(error, `watch the documents of ingest run ${run}`);
    }
    const stop = (): void => watcher.stop();
    signal.addEventListener('abort', stop, { once: true });
    try {
      for await (const entry of watcher) {
        if (entry.operation !== 'PUT') continue;
        let value: unknown;
        try {
          value = entry.json();
        } catch {
          continue;
        }
        const parsed = DocumentStatus.safeParse(value);
        if (parsed.success) yield parsed.data;
      }
    } finally {
      signal.removeEventListener('abort', stop);
      watcher.stop();
    }
  }
}
