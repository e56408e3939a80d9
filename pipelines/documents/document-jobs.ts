import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { setMaxListeners } from 'node:events';
import { headers as natsHeaders, type NatsConnection } from '@nats-io/transport-node';
import { jetstream, type JetStreamClient, type JsMsg } from '@nats-io/jetstream';
import { deadSourceOf, publishDeadLetter } from '../../adapters/nats/jobs/dead-letter.js';
import { DocumentLedger, type RunSeed } from '../../adapters/nats/documents/ledger.js';
import { ensureDocumentTopology, type DocumentTopology } from '../../adapters/nats/documents/topology.js';
import type { NatsEngine } from '../../adapters/nats/rpc/engine-client.js';
import type { JobsClient } from '../../adapters/nats/jobs/jobs-client.js';
import { JobsEngine } from '../../adapters/nats/jobs/jobs-engine.js';
import { withNatsRetry } from '../../adapters/nats/connection/nats-retry.js';
import type { PayloadStore } from '../../adapters/nats/connection/payloads.js';
import { handBack, priorDeliveries } from '../../adapters/nats/jobs/requeue.js';
import { decodeJson } from '../../adapters/nats/rpc/rpc-wire.js';
import type { Topology } from '../../adapters/nats/connection/topology.js';
import type { Logger } from '../../adapters/observability/logger.js';
import { DocumentJob, RunOpen, documentMessageId, type DocumentEvent, type RunEvent } from '../../adapters/protocol/documents.js';
import type { Engine } from '../../adapters/protocol/engine.js';
import { ErrorCode, ShoalError, toShoalError } from '../../adapters/protocol/errors.js';
import { WIRE_VERSION } from '../../adapters/protocol/jobs.js';
import type { Lifecycle } from '../../adapters/protocol/lifecycle.js';
import type { Store } from '../../adapters/stores/store.js';
import type { PipelineDefinition } from './definition.js';
import { BatchProgress, DEFAULT_STALL_MS } from './batch-progress.js';
import { capParseSettings, type ParseLimits } from './parse-limits.js';
import { ParserCache } from './parser-cache.js';
import { IngestRunner, type DocumentOutcome } from './runner.js';
import type { PendingSource } from './sources.js';

/**
 * The documents role of `shoal worker --documents` (SHOAL_DOCUMENTS=1): a worker that owns each
 * document job end to end (docs/nats.md, "Document jobs"). It pulls jobs from the pipelines'
 * durable consumers, reads each source, skips it when the index already holds the same content and
 * settings, parses it here (parse threads; OCR through this worker's engine), chunks it, encodes
 * the chunks through the encode model's jobs subject (model workers batch the chunks of many
 * documents, of many document workers, into one token budget), commits the rows and the document's
 * state, records how it ended in the ledger (once: ledger.ts), publishes its terminal event, counts
 * it into the run's status, and only then acks. Killed at any point, the job is redelivered and
 * redone: rows are upserts on deterministic ids, and the ledger answers a repeat with the first
 * outcome, so the index and the events end the same.
 *
 * Jobs are taken in batches (the documents of a batch share engine requests, like a wave of an
 * in-process run); two batches run at once, so one is parsed and chunked while the other is
 * encoded.
 */

export interface DocumentJobsOptions {
  nc: NatsConnection;
  topology: Topology;
  /** Pipelines this worker serves: one durable consumer each. */
  pipelines: readonly string[];
  /** A pipeline by name (built-in or the SHOAL_PIPELINES folder); NOT_FOUND/CONFIG_INVALID fail the document. */
  resolvePipeline: (name: string) => Promise<PipelineDefinition>;
  /** The sink of a configured index (SHOAL_INDEXES), opened once and kept; NOT_FOUND fails the document. */
  openIndex: (name: string, table: string) => Store;
  /** Reads `s3://`, `obj://` and `file://` sources (file roots and S3 buckets as configured). */
  payloads: PayloadStore;
  /** Request-reply to model workers (token counts) and the jobs client (encode jobs). */
  rpc: NatsEngine;
  jobs: JobsClient;
  /** This worker's own engine: OCR of scanned pages. */
  engine: Engine;
  workerId: string;
  /** @default 60000 */
  ackWaitMs?: number;
  /** Deliveries after which a document that never finished fails (TIMEOUT) and is dead-lettered. @default 5 */
  maxDeliver?: number;
  /** Documents per batch. @default 64 */
  batchDocuments?: number;
  /** Batches at once. @default 2 */
  batches?: number;
  /** Ceilings on the pipelines' parse limits (SHOAL_PARSE_MAX_PAGES, SHOAL_PARSE_MAX_BYTES, SHOAL_PARSE_MAX_DPI). */
  limits?: Partial<ParseLimits>;
  logger?: Logger;
  /** Counts ended documents by state (shoal_documents_total). */
  onEnded?: (state: DocumentEvent['state']) => void;
  /**
   * A batch showing no progress this long (batch-progress.ts says what counts) has its jobs handed
   * back for another delivery and its slot freed (SHOAL_DOCUMENTS_STALL_MS); 0 never.
   * @default 3600000
   */
  stallMs?: number;
  /** Counts batches given up as stalled (shoal_document_batches_stalled_total). */
  onStalled?: () => void;
}

const FETCH_EXPIRES_MS = 1000;
const ERROR_PAUSE_MS = 500;
/** How long a batch that failed on infrastructure (an index or the model workers unreachable) waits before its jobs come back. */
const RETRY_DELAY_MS = 5000;
/**
 * Stalled batches whose work has not returned, past which the worker takes no more jobs until
 * one does: each holds its documents in memory, and a worker whose batches keep stalling is
 * broken in a way more jobs will not mend (the log says so; a restart frees them).
 */
const MAX_STALLED_BATCHES = 4;

interface Job {
  msg: JsMsg;
  job: DocumentJob;
  /** The document's `source` in the index. */
  source: string;
}

/** A job's `source` as the index stores it: a file's absolute path (as `shoal ingest` does), else the URI or the inline id. */
export function indexSourceOf(job: DocumentJob): string {
  if ('text' in job.source) return job.source.id;
  const { uri, id } = job.source;
  if (id !== undefined) return id;
  if (uri.startsWith('file://')) {
    try {
      return fileURLToPath(uri);
    } catch {
      return uri;
    }
  }
  return uri;
}

export class DocumentJobs implements Lifecycle {
  readonly #options: DocumentJobsOptions;
  readonly #js: JetStreamClient;
  readonly #topology: DocumentTopology;
  readonly #ledger: DocumentLedger;
  readonly #inFlight = new Set<Promise<void>>();
  /** Jobs of the batches in flight, handed back to the queue by close() (a scale-down uses no delivery of theirs). */
  readonly #held = new Set<JsMsg>();
  readonly #shutdown = new AbortController();
  readonly #parsers: ParserCache;
  readonly #definitions = new Map<string, Promise<PipelineDefinition>>();
  /** Batches given up as stalled whose work has not returned yet (its slot is free; see MAX_STALLED_BATCHES). */
  readonly #stalled = new Set<Promise<void>>();
  /** The progress clocks of the documents being worked on, by source: a parsed page touches its batch's. */
  readonly #clocks = new Map<string, Set<BatchProgress>>();
  /** Resolves when the worker stops (drain or close): the pull loop's wait for a free slot ends with it. */
  #markStopped: () => void = () => undefined;
  readonly #stopped = new Promise<void>((resolve) => {
    this.#markStopped = resolve;
  });
  #loops: Promise<void>[] = [];
  #stopping = false;
  #next = 0;

  private constructor(options: DocumentJobsOptions, topology: DocumentTopology, ledger: DocumentLedger) {
    this.#options = options;
    this.#js = jetstream(options.nc);
    this.#topology = topology;
    this.#ledger = ledger;
    setMaxListeners(0, this.#shutdown.signal);
    this.#parsers = new ParserCache(options.engine, options.limits ?? {}, this.#shutdown.signal, { onPage: ({ source }) => this.#clocks.get(source)?.forEach((clock) => clock.touch()) });
  }

  static async start(options: DocumentJobsOptions): Promise<DocumentJobs> {
    // A replicated stream's creation can time out while a cluster is busy electing: retried.
    const topology = await withNatsRetry('set up the document-job topology', () => ensureDocumentTopology(options.nc, options.topology, options.pipelines, { ackWaitMs: options.ackWaitMs ?? 60_000 }));
    const ledger = await DocumentLedger.open(options.nc, topology.ingest.bucket);
    const jobs = new DocumentJobs(options, topology, ledger);
    jobs.#loops = [jobs.#pullDocuments(), jobs.#pullAnnouncements()];
    return jobs;
  }

  get inFlight(): number {
    return this.#inFlight.size;
  }

  async #pullDocuments(): Promise<void> {
    const { logger } = this.#options;
    const batches = this.#options.batches ?? 2;
    const size = this.#options.batchDocuments ?? 64;
    const { pipelines } = this.#options;
    let turn = 0;
    while (!this.#stopping) {
      if (this.#inFlight.size >= batches || this.#stalled.size >= MAX_STALLED_BATCHES) {
        await Promise.race([...this.#inFlight, ...this.#stalled, this.#stopped]);
        continue;
      }
      const pipeline = pipelines[turn++ % pipelines.length];
      if (pipeline === undefined) return;
      try {
        const consumer = await this.#js.consumers.get(this.#topology.names.stream, this.#topology.names.consumer(pipeline));
        // No more than is waiting (the info comes with the lookup), so the fetch returns at once: a
        // run's short last batch would otherwise wait out the expiry (1 s) before it starts.
        const pending = (await consumer.info(true)).num_pending;
        // Drained into an array first: slow work inside a fetch loop misses its heartbeats.
        const messages: JsMsg[] = [];
        for await (const msg of await consumer.fetch({ max_messages: pending > 0 ? Math.min(size, pending) : size, expires: FETCH_EXPIRES_MS })) messages.push(msg);
        if (messages.length > 0) this.#dispatch(messages);
      } catch (error) {
        if (this.#stopping) break;
        logger?.warn({ err: String(error), pipeline }, 'pulling document jobs failed; retrying');
        await new Promise((resolve) => setTimeout(resolve, ERROR_PAUSE_MS));
      }
    }
  }

  #dispatch(messages: JsMsg[]): void {
    const ackWaitMs = this.#options.ackWaitMs ?? 60_000;
    const stallMs = this.#options.stallMs ?? DEFAULT_STALL_MS;
    const progress = new BatchProgress();
    const stop = new AbortController();
    const keepAlive = setInterval(() => {
      if (stallMs > 0 && progress.idleMs() > stallMs) {
        this.#giveUp(messages, work, stop, stallMs);
        clearInterval(keepAlive);
        return;
      }
      for (const msg of messages) if (this.#held.has(msg)) msg.working();
    }, Math.max(200, Math.floor((stallMs > 0 ? Math.min(ackWaitMs, stallMs) : ackWaitMs) / 3)));
    for (const msg of messages) this.#held.add(msg);
    const work: Promise<void> = this.#batch(messages, progress, stop.signal)
      .catch((error: unknown) => {
        // Only NATS failures while settling reach here: the jobs are redelivered after the ack wait.
        this.#options.logger?.error({ err: String(error) }, 'handling document jobs failed');
      })
      .finally(() => {
        clearInterval(keepAlive);
        for (const msg of messages) this.#held.delete(msg);
        this.#inFlight.delete(work);
        this.#stalled.delete(work);
      });
    this.#inFlight.add(work);
  }

  /**
   * A batch that showed no progress for the stall limit: its jobs go back to the queue as another
   * delivery (so a document that stalls every worker fails TIMEOUT after SHOAL_MAX_DELIVER of them,
   * dead-lettered), its runs are told to stop, and its slot is freed for new jobs. Its work is not
   * waited for: whatever it waits on may never answer. If it does finish later, what it ended is
   * recorded once (the ledger answers the redelivered job with that outcome).
   */
  #giveUp(messages: readonly JsMsg[], work: Promise<void>, stop: AbortController, stallMs: number): void {
    const handed = messages.filter((msg) => this.#held.delete(msg));
    for (const msg of handed) msg.nak(RETRY_DELAY_MS);
    stop.abort(new ShoalError(ErrorCode.TIMEOUT, `the batch showed no progress for ${stallMs} ms`));
    this.#inFlight.delete(work);
    this.#stalled.add(work);
    this.#options.onStalled?.();
    this.#options.logger?.error(
      { documents: handed.length, stallMs, stalledBatches: this.#stalled.size },
      `a batch of ${handed.length} document job(s) showed no progress for ${Math.round(stallMs / 1000)} s (something it waits on does not answer: an index, the model workers, a source); its jobs are handed back for another delivery (a document that stalls every time fails TIMEOUT after SHOAL_MAX_DELIVER deliveries) and the worker goes on with new jobs${this.#stalled.size >= MAX_STALLED_BATCHES ? `; ${this.#stalled.size} stalled batches still hold their work, so this worker takes no more jobs until one returns: restart it` : ''} (limit: SHOAL_DOCUMENTS_STALL_MS)`,
    );
  }

  /** Run announcements (`<prefix>.runs.open`): recorded in the run's status, which may end the run. */
  async #pullAnnouncements(): Promise<void> {
    const names = this.#topology.names;
    while (!this.#stopping) {
      try {
        const consumer = await this.#js.consumers.get(names.runsStream, names.runsConsumer);
        const messages: JsMsg[] = [];
        for await (const msg of await consumer.fetch({ max_messages: 16, expires: 2 * FETCH_EXPIRES_MS })) messages.push(msg);
        for (const msg of messages) await this.#announce(msg);
      } catch (error) {
        if (this.#stopping) break;
        this.#options.logger?.warn({ err: String(error) }, 'pulling run announcements failed; retrying');
        await new Promise((resolve) => setTimeout(resolve, ERROR_PAUSE_MS));
      }
    }
  }

  async #announce(msg: JsMsg): Promise<void> {
    const decoded = decodeJson(msg.data);
    const parsed = decoded.ok ? RunOpen.safeParse(decoded.value) : null;
    if (parsed === null || !parsed.success) {
      this.#options.logger?.warn({ seq: msg.seq }, 'dropping a run announcement that is not {v, run_id, expected}');
      msg.term();
      return;
    }
    const open = parsed.data;
    const outcome = await this.#ledger.announce(open, { pipeline: open.pipeline ?? 'unknown', index: open.index ?? 'unknown' });
    if (outcome.ended !== null) await this.#publishRunEvent(outcome.ended);
    await msg.ackAck();
  }

  async #publishEvent(event: DocumentEvent): Promise<void> {
    const names = this.#topology.names;
    await withNatsRetry(`publish the event of ${event.run_id}/${event.doc}`, () => this.#js.publish(names.documentEvents(event.run_id), JSON.stringify(event), { msgID: documentMessageId(event.run_id, event.doc), expect: { streamName: names.eventsStream } }));
  }

  async #publishRunEvent(event: RunEvent): Promise<void> {
    const names = this.#topology.names;
    await withNatsRetry(`publish the end of run ${event.run_id}`, () => this.#js.publish(names.runEvents(event.run_id), JSON.stringify(event), { msgID: `run.${event.run_id}`, expect: { streamName: names.eventsStream } }));
  }

  /** A message that is no document job: dead-lettered with the reason (there is no run to tell). */
  async #poison(msg: JsMsg, reason: string): Promise<void> {
    const pipelineToken = msg.subject.split('.').at(-1) ?? 'unknown';
    this.#options.logger?.warn({ seq: msg.seq, subject: msg.subject }, `dead-lettering a document job: ${reason}`);
    await publishDeadLetter(
      { js: this.#js, sourceStream: this.#topology.names.stream, deadLetterStream: this.#options.topology.names.deadLetterStream, what: 'document job' },
      `${this.#options.topology.names.prefix}.dlq.documents.${pipelineToken}`,
      deadSourceOf(msg),
      { code: ErrorCode.INVALID_INPUT, message: reason },
    );
    msg.term();
  }

  /** Ends a document: ledger first (the outcome is decided once), then its event. Returns the outcome recorded. */
  async #end(job: Job, outcome: Omit<DocumentEvent, 'v' | 'run_id' | 'doc' | 'worker' | 'finished_at' | 'metadata'>): Promise<DocumentEvent> {
    const event: DocumentEvent = {
      v: WIRE_VERSION,
      run_id: job.job.run_id,
      doc: job.job.doc,
      ...outcome,
      ...(outcome.code === undefined ? {} : { code: outcome.code.slice(0, 64) }),
      ...(outcome.reason === undefined ? {} : { reason: outcome.reason.slice(0, 2048) }),
      ...(job.job.metadata === undefined ? {} : { metadata: job.job.metadata }),
      worker: this.#options.workerId.slice(0, 512),
      finished_at: new Date().toISOString(),
    };
    const recorded = await withNatsRetry(`record the end of ${event.run_id}/${event.doc}`, () => this.#ledger.end(event));
    await this.#publishEvent(recorded);
    this.#options.onEnded?.(recorded.state);
    return recorded;
  }

  async #batch(messages: JsMsg[], progress: BatchProgress, signal: AbortSignal): Promise<void> {
    const jobs: Job[] = [];
    for (const msg of messages) {
      const decoded = decodeJson(msg.data);
      const parsed = decoded.ok ? DocumentJob.safeParse(decoded.value) : null;
      if (parsed === null || !parsed.success) {
        const problem = parsed === null ? 'not JSON' : parsed.error.issues.slice(0, 3).map((issue) => `${issue.path.join('.') || '(message)'}: ${issue.message}`).join('; ');
        await this.#poison(msg, `not a document job (${problem})`);
        continue;
      }
      jobs.push({ msg, job: parsed.data, source: indexSourceOf(parsed.data) });
    }
    const ended: Job[] = [];
    const todo: Job[] = [];
    for (const job of jobs) {
      // Ended before (a redelivery after a lost ack, a job published twice): the same event again.
      // Retried through a broker restart or a leader election: a failed read would cost the batch an ack wait.
      const first = await withNatsRetry(`read the end of ${job.job.run_id}/${job.job.doc}`, () => this.#ledger.ended(job.job.run_id, job.job.doc));
      if (first !== null) {
        await this.#publishEvent(first);
        ended.push(job);
        continue;
      }
      const deliveries = job.msg.info.deliveryCount + priorDeliveries(job.msg.headers);
      const maxDeliver = this.#options.maxDeliver ?? 5;
      if (deliveries > maxDeliver) {
        // Every worker that took it died or stalled on it: a poison document must not circle for ever.
        await this.#end(job, { source: job.source, document_id: null, state: 'failed', code: ErrorCode.TIMEOUT, reason: `delivered ${deliveries} times without finishing (each worker that took it died or stalled)`, chunks: 0, pages: 0 });
        await publishDeadLetter(
          { js: this.#js, sourceStream: this.#topology.names.stream, deadLetterStream: this.#options.topology.names.deadLetterStream, what: 'document job' },
          this.#topology.names.deadLetter(job.job.pipeline),
          deadSourceOf(job.msg),
          { code: ErrorCode.TIMEOUT, message: `delivered ${deliveries} times without finishing` },
        ).catch(() => undefined);
        ended.push(job);
        continue;
      }
      // A consumer serves one pipeline (and permissions may be granted per subject): a job naming another is refused, not run as that one.
      if (job.msg.subject !== this.#topology.names.subject(job.job.pipeline)) {
        await this.#end(job, { source: job.source, document_id: null, state: 'failed', code: ErrorCode.INVALID_INPUT, reason: `published on ${job.msg.subject} but names pipeline ${JSON.stringify(job.job.pipeline)} (publish it on ${this.#topology.names.subject(job.job.pipeline)})`, chunks: 0, pages: 0 });
        ended.push(job);
        continue;
      }
      todo.push(job);
    }
    // One lane per pipeline and index: a run of the runner per lane.
    const lanes = new Map<string, Job[]>();
    const later: Job[] = [];
    for (const job of todo) {
      const key = `${job.job.pipeline}\u0000${job.job.index}`;
      const lane = lanes.get(key) ?? [];
      // The same source twice in one lane (two runs of one file): the second waits for a later batch, where it is unchanged.
      if (lane.some((other) => other.source === job.source)) {
        later.push(job);
        continue;
      }
      lane.push(job);
      lanes.set(key, lane);
    }
    for (const job of later) job.msg.nak(1000);
    const results = await Promise.allSettled([...lanes.values()].map((lane) => this.#lane(lane, progress, signal)));
    for (const result of results) if (result.status === 'fulfilled') ended.push(...result.value);
    await this.#count(ended);
    await Promise.all(ended.map((job) => job.msg.ackAck().catch((error: unknown) => this.#options.logger?.warn({ err: String(error), run: job.job.run_id, doc: job.job.doc }, 'ack of a document job failed; it will be redelivered and answered from the ledger'))));
  }

  /** Counts ended documents into their runs' status; a run that is over publishes its run event. */
  async #count(ended: readonly Job[]): Promise<void> {
    const runs = new Map<string, RunSeed>();
    for (const { job } of ended) if (!runs.has(job.run_id)) runs.set(job.run_id, { pipeline: job.pipeline, index: job.index });
    for (const [runId, seed] of runs) {
      const outcome = await withNatsRetry(`count run ${runId}`, () => this.#ledger.count(runId, seed));
      if (outcome.ended !== null) await this.#publishRunEvent(outcome.ended);
    }
  }

  #definition(name: string): Promise<PipelineDefinition> {
    let found = this.#definitions.get(name);
    if (found === undefined) {
      found = this.#options.resolvePipeline(name);
      // A pipeline that failed to load is looked up again next time (its file may be fixed).
      found.catch(() => this.#definitions.delete(name));
      this.#definitions.set(name, found);
    }
    return found;
  }

  #pending(job: Job, definition: PipelineDefinition): PendingSource {
    const { source } = job.job;
    const maxBytes = capParseSettings(definition.stages.parse, this.#options.limits ?? {}).maxBytes;
    // The job's metadata is stored with the document's chunks (checked against the metadata bounds by the runner: document-metadata.ts).
    const metadata = job.job.metadata === undefined ? {} : { metadata: job.job.metadata };
    if ('text' in source) {
      return { uri: job.source, load: async () => ({ source: { uri: job.source, id: source.id, text: source.text, ...metadata }, bytes: new TextEncoder().encode(source.text) }) };
    }
    return {
      uri: job.source,
      load: async () => {
        const bytes = await this.#options.payloads.get(source.uri, {
          maxBytes,
          tooLarge: (size, ref) => new ShoalError(ErrorCode.DOCUMENT_TOO_LARGE, `${ref} has ${size} bytes, over the pipeline's maxBytes of ${maxBytes}`),
        });
        // The name is a hint for the type (`.md` is Markdown), as for a file read in process.
        const name = (source.id ?? source.uri).split('/').at(-1);
        return { source: { uri: job.source, bytes, ...(name === undefined || name === '' ? {} : { path: name }), ...metadata }, bytes };
      },
    };
  }

  /** Runs one lane (one pipeline and index) through the runner, its progress on the batch's clock; returns the jobs it ended. */
  async #lane(lane: readonly Job[], progress: BatchProgress, signal: AbortSignal): Promise<Job[]> {
    for (const job of lane) {
      const clocks = this.#clocks.get(job.source) ?? new Set<BatchProgress>();
      this.#clocks.set(job.source, clocks.add(progress));
    }
    try {
      return await this.#runLane(lane, progress, signal);
    } finally {
      for (const job of lane) {
        const clocks = this.#clocks.get(job.source);
        clocks?.delete(progress);
        if (clocks?.size === 0) this.#clocks.delete(job.source);
      }
    }
  }

  async #runLane(lane: readonly Job[], progress: BatchProgress, signal: AbortSignal): Promise<Job[]> {
    const first = lane[0];
    if (first === undefined) return [];
    const { pipeline, index } = first.job;
    let definition: PipelineDefinition;
    let sink: Store;
    try {
      definition = await this.#definition(pipeline);
      sink = this.#options.openIndex(index, definition.stages.write.table);
    } catch (error) {
      // A name this worker does not know ends the documents (each says why), not the worker.
      const shoal = toShoalError(error);
      for (const job of lane) await this.#end(job, { source: job.source, document_id: null, state: 'failed', code: shoal.code, reason: shoal.message, chunks: 0, pages: 0 });
      return [...lane];
    }
    const bySource = new Map(lane.map((job) => [job.source, job]));
    const outcomes: DocumentOutcome[] = [];
    // Redone after a kill: a document whose intent this run recorded and whose state the index now holds was committed by this run.
    const redone = lane.filter((job) => job.msg.info.deliveryCount + priorDeliveries(job.msg.headers) > 1);
    const intents = new Map(await Promise.all(redone.map(async (job) => [job.source, await withNatsRetry(`read the intent of ${job.job.run_id}/${job.job.doc}`, () => this.#ledger.intent(job.job.run_id, job.job.doc))] as const)));
    const touch = (): void => progress.touch();
    const runner = new IngestRunner({
      definition,
      engine: new JobsEngine(this.#options.rpc, this.#options.jobs, { jobPrefix: `d${randomBytes(8).toString('hex')}${(this.#next++).toString(36)}`, onProgress: touch }),
      sink,
      reader: this.#parsers.get(definition.stages.parse),
      tableMetadata: {},
      signal,
      onProgress: touch,
      onStage: touch,
      onIndexing: (running) => progress.indexing(running),
      beforeCommit: async (states) => {
        touch();
        await Promise.all(
          states.map((state) => {
            const job = bySource.get(state.source);
            return job === undefined ? Promise.resolve() : withNatsRetry('record a commit intent', () => this.#ledger.putIntent(job.job.run_id, job.job.doc, { document_id: state.document_id, settings: state.settings }));
          }),
        );
      },
      onOutcome: (outcome) => {
        touch();
        outcomes.push(outcome);
      },
    });
    try {
      await runner.run(lane.map((job) => this.#pending(job, definition)));
    } catch (error) {
      const shoal = toShoalError(error);
      if (shoal.code === ErrorCode.CONFIG_INVALID || shoal.code === ErrorCode.MODEL_NOT_FOUND) {
        // The pipeline cannot run against this index (another model's table, a model no worker has): every document fails with why.
        const done = new Set(outcomes.map((outcome) => outcome.source));
        for (const job of lane) if (!done.has(job.source)) outcomes.push({ source: job.source, state: 'failed', documentId: null, chunks: 0, pages: 0, code: shoal.code, reason: shoal.message });
      } else {
        // Infrastructure (the index, the model workers, NATS): what ended is kept, the rest comes back later.
        this.#options.logger?.warn({ code: shoal.code, err: shoal.message, pipeline, index }, 'a batch of documents stopped; their jobs are retried');
        const done = new Set(outcomes.map((outcome) => outcome.source));
        for (const job of lane) if (!done.has(job.source)) job.msg.nak(RETRY_DELAY_MS);
      }
    }
    const ended: Job[] = [];
    for (const outcome of outcomes) {
      const job = bySource.get(outcome.source);
      if (job === undefined) continue;
      const intent = intents.get(job.source);
      const committedBefore = outcome.state === 'unchanged' && intent !== null && intent !== undefined && intent.document_id === outcome.documentId && intent.settings === runner.settingsHash;
      await this.#end(job, {
        source: job.source,
        document_id: outcome.documentId,
        state: committedBefore ? 'committed' : outcome.state,
        ...(outcome.code === undefined ? {} : { code: outcome.code }),
        ...(outcome.reason === undefined ? {} : { reason: outcome.reason }),
        chunks: outcome.chunks,
        pages: outcome.pages,
        ...(outcome.ocrPages === undefined ? {} : { ocr_pages: outcome.ocrPages }),
      });
      ended.push(job);
    }
    return ended;
  }

  /** Stops pulling and finishes the batches in flight. */
  async drain(): Promise<void> {
    this.#stopping = true;
    this.#markStopped();
    await Promise.all(this.#loops);
    while (this.#inFlight.size > 0) await Promise.all([...this.#inFlight]);
    await this.#parsers.close();
  }

  /**
   * Stops at once: the jobs of the batches in flight are handed back to the queue (a fresh copy
   * published, then the delivery acked: requeue.ts), so another worker takes them now and a
   * scale-down uses none of their deliveries. A batch that still finishes one meanwhile is answered
   * from the ledger when the copy comes (the same event, counted once).
   */
  async close(): Promise<void> {
    this.#shutdown.abort();
    this.#stopping = true;
    this.#markStopped();
    const held = [...this.#held];
    this.#held.clear();
    await Promise.all(
      held.map((msg) =>
        handBack(msg, { js: this.#js, stream: this.#topology.names.stream, fallbackId: `${msg.subject}.${msg.seq}`, what: 'document job', log: { seq: msg.seq }, logger: this.#options.logger }).catch(() => undefined),
      ),
    );
    await this.#parsers.close();
  }
}

/** Headers a producer sets on a document job (exported for producers in TypeScript). */
export function documentJobHeaders(job: Pick<DocumentJob, 'run_id' | 'doc'>): ReturnType<typeof natsHeaders> {
  const h = natsHeaders();
  h.set('Nats-Msg-Id', documentMessageId(job.run_id, job.doc));
  return h;
}
