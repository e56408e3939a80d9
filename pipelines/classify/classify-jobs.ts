import { setMaxListeners } from 'node:events';
import { jetstream, type JetStreamClient, type JsMsg } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import type { z } from 'zod';
import { ClassifyLedger, chunkCounted, type ClassifyRunSeed } from '../../adapters/nats/classify/ledger.js';
import { ensureClassifyTopology, type ClassifyTopology } from '../../adapters/nats/classify/topology.js';
import { deadSourceOf, publishDeadLetter } from '../../adapters/nats/jobs/dead-letter.js';
import type { JobsClient } from '../../adapters/nats/jobs/jobs-client.js';
import { JobsEngine } from '../../adapters/nats/jobs/jobs-engine.js';
import { withNatsRetry } from '../../adapters/nats/connection/nats-retry.js';
import { getJson, type PayloadStore } from '../../adapters/nats/connection/payloads.js';
import { priorDeliveries } from '../../adapters/nats/jobs/requeue.js';
import { decodeJson } from '../../adapters/nats/rpc/rpc-wire.js';
import type { Topology } from '../../adapters/nats/connection/topology.js';
import type { Logger } from '../../adapters/observability/logger.js';
import { ClassifyChunk, ClassifyChunkItems, ClassifyRunEnd, type ClassifyChunkItem, type ClassifyJobRecord } from '../../adapters/protocol/classify-jobs.js';
import type { Classification, ClassifyItem } from '../../adapters/protocol/classify.js';
import type { Engine } from '../../adapters/protocol/engine.js';
import { ERROR_TRAITS, ErrorCode, ShoalError, toShoalError } from '../../adapters/protocol/errors.js';
import type { Lifecycle } from '../../adapters/protocol/lifecycle.js';
import { parseWith } from '../../adapters/protocol/validate.js';
import { assembleResults, removeChunkObjects } from './assemble-results.js';
import type { CategorySource } from './category-index.js';
import { ObjectStoreCategories } from './category-store.js';
import { classifierJobPrefix, JobClassifiers, type RunSpec } from './job-classifiers.js';

/**
 * The classify role of `shoal worker --classify` (SHOAL_CLASSIFY=1): catalogs classified as jobs,
 * with no process coordinating a run (docs/nats.md, "Classification jobs"). It pulls chunk
 * messages from the one classify consumer, reads the run's spec once, keeps a classifier per
 * taxonomy and model (its category matrix from the local cache, the object store, or embedded
 * once through the model workers and stored there for every other worker), encodes the chunk's
 * products through encode jobs on the model's subject (reranks by request-reply), writes the
 * chunk's JSON Lines to the object store, counts the chunk once in the run's status, and only then
 * acks. The worker that counts the last chunk (or handles the end message that completes the
 * count) writes the results in catalog order to the run's target and marks the run `completed`.
 * Killed at any point, the message is redelivered: a chunk done again writes the same lines and
 * is not counted again; an assembly redone writes the same results.
 */

export interface ClassifyJobsOptions {
  nc: NatsConnection;
  topology: Topology;
  /** The payload bucket (specs, chunk lines, category matrices) and the result targets (`obj://`, `s3://`, `file://` inside the file roots). */
  payloads: PayloadStore;
  /** Request-reply to the model workers: rerank scores (retried while they restart). */
  rpc: Engine;
  /** Encode jobs on the models' subjects. */
  jobs: JobsClient;
  /** Local category cache in front of the object store's (`classify/` beneath it). @default none */
  cacheDir?: string | null;
  workerId: string;
  /** @default 60000 */
  ackWaitMs?: number;
  /** Deliveries after which a chunk that never finished fails its run (TIMEOUT) and is dead-lettered. @default 5 */
  maxDeliver?: number;
  /** Chunks classified at once. @default 2 */
  concurrency?: number;
  /** Classifiers (category matrices, search threads) kept open. @default 3 */
  keptClassifiers?: number;
  logger?: Logger;
  /** Counts chunk deliveries by outcome (shoal_classify_chunks_total). */
  onChunk?: (outcome: ChunkOutcome) => void;
  /** Counts category matrices by where they came from (shoal_classify_category_matrices_total). */
  onCategories?: (source: CategorySource) => void;
}

/** `counted`: classified and counted; `repeat`: done before (answered from the status); `failed`: the run failed; `retry`: handed back. */
export type ChunkOutcome = 'counted' | 'repeat' | 'failed' | 'retry';

const FETCH_EXPIRES_MS = 1000;
const ERROR_PAUSE_MS = 500;
/** How long a chunk that failed on infrastructure waits before it comes back. */
const RETRY_DELAY_MS = 5000;

function seedOf(run: RunSpec, specRef: string, defaultResult: string): ClassifyRunSeed {
  return { model: run.spec.request.model, specRef, result: run.spec.result ?? defaultResult };
}

export class ClassifyJobs implements Lifecycle {
  readonly #options: ClassifyJobsOptions;
  readonly #js: JetStreamClient;
  readonly #topology: ClassifyTopology;
  readonly #ledger: ClassifyLedger;
  readonly #classifiers: JobClassifiers;
  readonly #inFlight = new Set<Promise<void>>();
  readonly #shutdown = new AbortController();
  #loop: Promise<void> = Promise.resolve();
  #stopping = false;

  private constructor(options: ClassifyJobsOptions, topology: ClassifyTopology, ledger: ClassifyLedger) {
    this.#options = options;
    this.#js = jetstream(options.nc);
    this.#topology = topology;
    this.#ledger = ledger;
    setMaxListeners(0, this.#shutdown.signal);
    const { payloads, logger } = options;
    this.#classifiers = new JobClassifiers({
      payloads,
      engine: () => new JobsEngine(options.rpc, options.jobs, { jobPrefix: classifierJobPrefix() }),
      cacheDir: options.cacheDir ?? null,
      shared: new ObjectStoreCategories(payloads, topology.names.categoriesObject),
      onSharedError: (error) => logger?.warn({ err: String(error) }, 'could not store a category matrix in the object store; the next worker builds it again'),
      keep: options.keptClassifiers ?? 3,
      onOpened: (source, categories, seconds, where) => {
        options.onCategories?.(source);
        logger?.info({ source, categories, seconds: Math.round(seconds * 10) / 10, where }, `category matrix ${source === 'built' ? 'embedded and stored' : source === 'store' ? 'read from the object store' : 'read from the local cache'}`);
      },
    });
  }

  static async start(options: ClassifyJobsOptions): Promise<ClassifyJobs> {
    const topology = await ensureClassifyTopology(options.nc, options.topology, { ackWaitMs: options.ackWaitMs ?? 60_000 });
    const ledger = await ClassifyLedger.open(options.nc, topology.ingest.bucket);
    const jobs = new ClassifyJobs(options, topology, ledger);
    jobs.#loop = jobs.#pull();
    return jobs;
  }

  get inFlight(): number {
    return this.#inFlight.size;
  }

  #defaultResult(runId: string): string {
    return `obj://${this.#options.payloads.bucket}/${this.#topology.names.resultsObject(runId)}`;
  }

  async #pull(): Promise<void> {
    const concurrency = this.#options.concurrency ?? 2;
    const names = this.#topology.names;
    while (!this.#stopping) {
      if (this.#inFlight.size >= concurrency) {
        await Promise.race(this.#inFlight);
        continue;
      }
      try {
        const consumer = await this.#js.consumers.get(names.stream, names.consumer);
        // Drained into an array first: slow work inside a fetch loop misses its heartbeats.
        const messages: JsMsg[] = [];
        for await (const msg of await consumer.fetch({ max_messages: concurrency - this.#inFlight.size, expires: FETCH_EXPIRES_MS })) messages.push(msg);
        for (const msg of messages) this.#dispatch(msg);
      } catch (error) {
        if (this.#stopping) break;
        this.#options.logger?.warn({ err: String(error) }, 'pulling classification chunks failed; retrying');
        await new Promise((resolve) => setTimeout(resolve, ERROR_PAUSE_MS));
      }
    }
  }

  #dispatch(msg: JsMsg): void {
    const ackWaitMs = this.#options.ackWaitMs ?? 60_000;
    const keepAlive = setInterval(() => msg.working(), Math.max(200, Math.floor(ackWaitMs / 3)));
    const work = this.#handle(msg)
      .then((outcome) => this.#options.onChunk?.(outcome))
      .catch((error: unknown) => {
        // Only NATS failures while settling reach here: the message is redelivered after the ack wait.
        this.#options.logger?.error({ err: String(error), subject: msg.subject, seq: msg.seq }, 'handling a classification message failed');
      })
      .finally(() => {
        clearInterval(keepAlive);
        this.#inFlight.delete(work);
      });
    this.#inFlight.add(work);
  }

  async #handle(msg: JsMsg): Promise<ChunkOutcome> {
    const names = this.#topology.names;
    const decoded = decodeJson(msg.data);
    if (msg.subject === names.end) {
      const parsed = decoded.ok ? ClassifyRunEnd.safeParse(decoded.value) : null;
      if (parsed === null || !parsed.success) return this.#poison(msg, `not a classification run end (${problems(parsed)})`);
      return this.#end(msg, parsed.data);
    }
    if (msg.subject !== names.chunks) return this.#poison(msg, `a message on ${msg.subject}, which is neither ${names.chunks} nor ${names.end}`);
    const parsed = decoded.ok ? ClassifyChunk.safeParse(decoded.value) : null;
    if (parsed === null || !parsed.success) return this.#poison(msg, `not a classification chunk (${problems(parsed)})`);
    return this.#chunk(msg, parsed.data);
  }

  /** A message that is no chunk: dead-lettered with the reason (there is no run to tell). */
  async #poison(msg: JsMsg, reason: string): Promise<ChunkOutcome> {
    this.#options.logger?.warn({ seq: msg.seq, subject: msg.subject }, `dead-lettering a classification message: ${reason}`);
    await this.#deadLetter(msg, ErrorCode.INVALID_INPUT, reason);
    msg.term();
    return 'failed';
  }

  async #deadLetter(msg: JsMsg, code: ErrorCode, message: string): Promise<void> {
    await publishDeadLetter(
      { js: this.#js, sourceStream: this.#topology.names.stream, deadLetterStream: this.#options.topology.names.deadLetterStream, what: 'classification message' },
      this.#topology.names.deadLetter,
      deadSourceOf(msg),
      { code, message },
    );
  }

  /** The end message: the run's size recorded; when every chunk is counted already, the results are assembled here. */
  async #end(msg: JsMsg, end: ClassifyRunEnd): Promise<ChunkOutcome> {
    try {
      const found = await withNatsRetry(`read run ${end.run_id}`, () => this.#ledger.get(end.run_id));
      const seed = found === null ? seedOf(await this.#classifiers.spec(end.spec_ref), end.spec_ref, this.#defaultResult(end.run_id)) : { model: found.record.model, specRef: found.record.spec_ref, result: found.record.result };
      const record = await withNatsRetry(`record the end of run ${end.run_id}`, () => this.#ledger.announce(end, seed));
      if (record.state === 'assembling') await this.#assemble(record);
      await msg.ackAck();
      return 'counted';
    } catch (error) {
      return this.#failed(msg, end.run_id, end.spec_ref, error);
    }
  }

  async #chunk(msg: JsMsg, job: ClassifyChunk): Promise<ChunkOutcome> {
    const { run_id: runId, chunk } = job;
    try {
      const found = await withNatsRetry(`read run ${runId}`, () => this.#ledger.get(runId));
      const record = found?.record ?? null;
      if (record !== null && (record.state === 'failed' || record.state === 'completed' || chunkCounted(record, chunk))) {
        // Done before (a redelivery after a lost ack or a kill): an assembly left unfinished is finished here.
        if (record.state === 'assembling') await this.#assemble(record);
        await msg.ackAck();
        return 'repeat';
      }
      const deliveries = msg.info.deliveryCount + priorDeliveries(msg.headers);
      const maxDeliver = this.#options.maxDeliver ?? 5;
      if (deliveries > maxDeliver) {
        // Every worker that took it died or stalled on it: the run cannot complete, and says why.
        const reason = `chunk ${chunk} was delivered ${deliveries} times without finishing (each worker that took it died or stalled)`;
        await this.#ledger.fail(runId, { code: ErrorCode.TIMEOUT, message: reason }, record === null ? await this.#seed(job) : recordSeed(record));
        await this.#deadLetter(msg, ErrorCode.TIMEOUT, reason).catch(() => undefined);
        await msg.ackAck();
        return 'failed';
      }
      const run = await this.#classifiers.spec(job.spec_ref);
      const items = job.items ?? (await this.#items(job.items_ref ?? ''));
      const signal = this.#shutdown.signal;
      const { lines, categories } = await this.#classifiers.use(run, signal, async (classifier) => ({
        lines: await classifyLines(items, job.first_index, (texts) => classifier.classify(texts, { signal }, run.options)),
        categories: classifier.taxonomy.categories.length,
      }));
      const ref = `obj://${this.#options.payloads.bucket}/${this.#topology.names.chunkObject(runId, chunk)}`;
      await withNatsRetry(`store the lines of chunk ${chunk} of run ${runId}`, () => this.#options.payloads.put(this.#topology.names.chunkObject(runId, chunk), new TextEncoder().encode(lines)));
      const counted = await withNatsRetry(`count chunk ${chunk} of run ${runId}`, () => this.#ledger.countChunk(runId, chunk, items.length, seedOf(run, job.spec_ref, this.#defaultResult(runId)), categories));
      this.#options.logger?.debug({ run: runId, chunk, items: items.length, counted: counted.counted, lines: ref }, 'classification chunk done');
      if (counted.record.state === 'assembling') await this.#assemble(counted.record);
      await msg.ackAck();
      return counted.counted ? 'counted' : 'repeat';
    } catch (error) {
      return this.#failed(msg, runId, job.spec_ref, error);
    }
  }

  /** Why a message could not be handled: an outage comes back later; the run's own fault fails the run. */
  async #failed(msg: JsMsg, runId: string, specRef: string, error: unknown): Promise<ChunkOutcome> {
    const shoal = toShoalError(error);
    if (this.#shutdown.signal.aborted) {
      // Stopped mid-chunk: another worker takes it (no delivery is the chunk's fault).
      msg.nak();
      return 'retry';
    }
    if (ERROR_TRAITS[shoal.code].retryable) {
      this.#options.logger?.warn({ run: runId, code: shoal.code, err: shoal.message }, 'a classification chunk stopped; it is retried');
      msg.nak(RETRY_DELAY_MS);
      return 'retry';
    }
    this.#options.logger?.warn({ run: runId, code: shoal.code, err: shoal.message }, 'classification run failed');
    const seed = { model: 'unknown', specRef, result: this.#defaultResult(runId) };
    await withNatsRetry(`fail run ${runId}`, () => this.#ledger.fail(runId, { code: shoal.code, message: shoal.message }, seed));
    msg.term();
    return 'failed';
  }

  async #seed(job: ClassifyChunk): Promise<ClassifyRunSeed> {
    return seedOf(await this.#classifiers.spec(job.spec_ref), job.spec_ref, this.#defaultResult(job.run_id));
  }

  async #items(ref: string): Promise<ClassifyChunkItem[]> {
    const value = await withNatsRetry(`read the products ${ref}`, () => getJson(this.#options.payloads, ref));
    return parseWith(ClassifyChunkItems, value, `products of ${ref}`);
  }

  /** Writes the results and completes the run (again after a kill: the same bytes). */
  async #assemble(record: ClassifyJobRecord): Promise<void> {
    const started = performance.now();
    const target = await assembleResults({ payloads: this.#options.payloads, names: this.#topology.names, signal: this.#shutdown.signal }, record);
    const completed = await withNatsRetry(`complete run ${record.job_id}`, () => this.#ledger.complete(record.job_id, recordSeed(record)));
    this.#options.logger?.info({ run: record.job_id, items: completed.items_done, chunks: completed.chunks, target, seconds: (performance.now() - started) / 1000 }, 'classification run completed');
    await removeChunkObjects({ payloads: this.#options.payloads, names: this.#topology.names }, completed);
  }

  /** Stops pulling and finishes the chunks in flight. */
  async drain(): Promise<void> {
    this.#stopping = true;
    await this.#loop;
    while (this.#inFlight.size > 0) await Promise.all([...this.#inFlight]);
    await this.#classifiers.close();
  }

  /** Stops at once: chunks not finished come back to another worker. */
  async close(): Promise<void> {
    this.#shutdown.abort();
    this.#stopping = true;
    await this.#classifiers.close();
  }
}

function recordSeed(record: ClassifyJobRecord): ClassifyRunSeed {
  return { model: record.model, specRef: record.spec_ref, result: record.result };
}

/** Why a message is not what its subject says (the first three issues), for its dead letter. */
function problems(parsed: { success: true } | { success: false; error: z.ZodError } | null): string {
  if (parsed === null) return 'not JSON';
  if (parsed.success) return '';
  return parsed.error.issues
    .slice(0, 3)
    .map((issue) => `${issue.path.map(String).join('.') || '(message)'}: ${issue.message}`)
    .join('; ');
}

/**
 * The chunk's lines, in its order: the products with text classified together, an error item
 * written as it is. A product without `id` gets its position in the catalog.
 */
export async function classifyLines(items: readonly ClassifyChunkItem[], firstIndex: number, classify: (texts: ClassifyItem[]) => Promise<Classification[]>): Promise<string> {
  const texts: ClassifyItem[] = items.flatMap((item, at) => ('error' in item ? [] : [{ ...item, id: item.id ?? firstIndex + at }]));
  const results = texts.length === 0 ? [] : await classify(texts);
  if (results.length !== texts.length) throw new ShoalError(ErrorCode.INTERNAL, `${results.length} classifications for ${texts.length} products`);
  let next = 0;
  let out = '';
  for (const item of items) out += `${JSON.stringify('error' in item ? { id: item.id, error: item.error } : results[next++])}\n`;
  return out;
}
