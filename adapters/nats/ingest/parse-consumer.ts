import { createHash } from 'node:crypto';
import { setMaxListeners } from 'node:events';
import type { JetStreamClient, JsMsg } from '@nats-io/jetstream';
import type { Logger } from '../../observability/logger.js';
import { ERROR_TRAITS, ErrorCode, ShoalError, toShoalError } from '../../protocol/errors.js';
import { ParseTask, StoredPages, type DocumentStatus, type ParseTaskSettings, type StoredPage } from '../../protocol/ingest.js';
import { WIRE_VERSION } from '../../protocol/jobs.js';
import type { Lifecycle } from '../../protocol/lifecycle.js';
import { parseWith } from '../../protocol/validate.js';
import { deadSourceOf } from '../jobs/dead-letter.js';
import type { IngestNames, IngestStatusStore } from './ingest-store.js';
import type { ParseDeadLetters } from './parse-dead-letters.js';
import { pagesKey, parseTaskCheck } from './parse-task-token.js';
import { taskStanding, writeAnswer } from './parse-task-standing.js';
import type { PayloadStore } from '../connection/payloads.js';
import { handBack, priorDeliveries } from '../jobs/requeue.js';
import { decodeJson } from '../rpc/rpc-wire.js';

/**
 * The parse role of a worker: pulls parse tasks (one document each, its bytes in the object
 * store) from the shared durable consumer, runs the parse stage on them (the callback: the
 * pipeline's DocumentParser, composed in services/worker), stores the pages in the object store
 * and records the document `parsed` (or `failed` with its code) in the ingest KV bucket; only
 * then is the task acked. A worker killed mid-task leaves it unacked: it is redelivered after the
 * ack wait and parsed again, writing the same pages and the same status (idempotent).
 * A task whose document already has a later state (a redelivery after a lost ack) is acked as is.
 */

export interface ParseInput {
  source: string;
  id?: string | undefined;
  /** The file name the coordinator read, when it read a file. */
  name?: string | undefined;
  bytes: Uint8Array;
  /** An inline `{"id","text"}` record: parsed as text. */
  inlineText: boolean;
  settings: ParseTaskSettings;
}

export type ParseAnswer =
  | { ok: true; type: StoredPages['type']; pages: StoredPage[]; title?: string | undefined }
  | { ok: false; code: string; reason: string };

/** Parses one document; a bad document is an answer with a code, a throw is an infrastructure failure (retried). */
export type ParseFn = (input: ParseInput) => Promise<ParseAnswer>;

export interface ParseConsumerOptions {
  js: JetStreamClient;
  names: IngestNames;
  status: IngestStatusStore;
  payloads: PayloadStore;
  parse: ParseFn;
  /** Where tasks that fail for good go (and their documents are marked failed). */
  deadLetters: ParseDeadLetters;
  /** Documents parsed at once. @default 2 */
  concurrency?: number;
  ackWaitMs: number;
  maxDeliver: number;
  /** First redelivery delay after an infrastructure failure (doubles per delivery). @default 1000 */
  retryDelayMs?: number;
  workerId: string;
  logger?: Logger;
}

const FETCH_EXPIRES_MS = 1000;
const ERROR_PAUSE_MS = 500;

export class ParseTaskConsumer implements Lifecycle {
  readonly #options: ParseConsumerOptions;
  readonly #inFlight = new Set<Promise<void>>();
  readonly #shutdown = new AbortController();
  #loop: Promise<void> | null = null;
  #stopping = false;

  constructor(options: ParseConsumerOptions) {
    this.#options = options;
    setMaxListeners(0, this.#shutdown.signal);
  }

  get inFlight(): number {
    return this.#inFlight.size;
  }

  start(): void {
    this.#loop ??= this.#run();
  }

  async #run(): Promise<void> {
    const { js, names, logger } = this.#options;
    const concurrency = this.#options.concurrency ?? 2;
    while (!this.#stopping) {
      const free = concurrency - this.#inFlight.size;
      if (free <= 0) {
        await Promise.race(this.#inFlight);
        continue;
      }
      try {
        const consumer = await js.consumers.get(names.stream, names.parseConsumer);
        // Drained into an array first: slow work inside a fetch loop misses its heartbeats.
        const messages: JsMsg[] = [];
        for await (const msg of await consumer.fetch({ max_messages: free, expires: FETCH_EXPIRES_MS })) messages.push(msg);
        for (const msg of messages) this.#dispatch(msg);
      } catch (error) {
        if (this.#stopping) break;
        logger?.warn({ err: String(error) }, 'pulling parse tasks failed; retrying');
        await new Promise((resolve) => setTimeout(resolve, ERROR_PAUSE_MS));
      }
    }
  }

  #dispatch(msg: JsMsg): void {
    const keepAlive = setInterval(() => msg.working(), Math.max(200, Math.floor(this.#options.ackWaitMs / 3)));
    const work = this.#handle(msg)
      .catch((error: unknown) => {
        // Only NATS failures while settling reach here: the task is redelivered after the ack wait.
        this.#options.logger?.error({ err: String(error), seq: msg.seq }, 'handling a parse task failed');
      })
      .finally(() => {
        clearInterval(keepAlive);
        this.#inFlight.delete(work);
      });
    this.#inFlight.add(work);
  }

  async #handle(msg: JsMsg): Promise<void> {
    const { status, payloads, logger } = this.#options;
    const decoded = decodeJson(msg.data);
    const parsed = decoded.ok ? ParseTask.safeParse(decoded.value) : null;
    if (parsed === null || !parsed.success) {
      // Not a task of ours: no document to record, and it can never succeed.
      logger?.warn({ seq: msg.seq }, 'dead-lettering a message that is not a parse task');
      await this.#options.deadLetters.settle(deadSourceOf(msg), new ShoalError(ErrorCode.INVALID_INPUT, 'not a parse task (not JSON, or not the ParseTask schema)'));
      msg.term();
      return;
    }
    const task = parsed.data;
    const check = parseTaskCheck(task);
    const standing = taskStanding(await status.document(task.run_id, task.doc), task);
    // Answered already (a lost ack), or no task its run queued (forged, superseded): nothing to parse.
    if (standing !== 'open') {
      if (standing !== 'answered') this.#dropped(task, standing);
      await msg.ackAck();
      return;
    }
    const base = { v: WIRE_VERSION, run_id: task.run_id, doc: task.doc, source: task.source, document_id: task.document_id, worker: this.#options.workerId, ...(check === undefined ? {} : { task: check }) } as const;
    try {
      const bytes = await payloads.get(task.ref);
      if (createHash('sha256').update(bytes).digest('hex') !== task.document_id) {
        throw new ShoalError(ErrorCode.INVALID_INPUT, `${task.ref} does not hold the document ${task.document_id} (its content changed)`);
      }
      if (this.#shutdown.signal.aborted) throw new ShoalError(ErrorCode.CANCELLED, 'the worker is stopping');
      const answer = await this.#options.parse({ source: task.source, id: task.id, name: task.name, bytes, inlineText: task.inline_text === true, settings: task.parse });
      const now = new Date().toISOString();
      if (answer.ok) {
        const title = answer.title === undefined ? {} : { title: answer.title.slice(0, 4096) };
        const stored = parseWith(StoredPages, { v: WIRE_VERSION, document_id: task.document_id, type: answer.type, pages: answer.pages, ...title }, 'parsed pages', ErrorCode.INTERNAL);
        const pagesRef = await payloads.put(pagesKey(task), Buffer.from(JSON.stringify(stored), 'utf8'));
        const ocrPages = answer.pages.filter((page) => page.ocr).length;
        const written = await writeAnswer(status, task, { ...base, state: 'parsed', pages: answer.pages.length, ocr_pages: ocrPages, pages_ref: pagesRef, updated_at: now });
        if (written !== 'written' && written !== 'answered') {
          this.#dropped(task, written);
          await payloads.remove(pagesRef).catch(() => undefined);
        }
      } else {
        const written = await writeAnswer(status, task, { ...base, state: 'failed', code: answer.code.slice(0, 64), reason: answer.reason.slice(0, 2048), updated_at: now });
        if (written !== 'written' && written !== 'answered') this.#dropped(task, written);
      }
      await msg.ackAck();
    } catch (error) {
      await this.#fail(msg, base, toShoalError(error));
    }
  }

  /** A task no coordinator waits for (its document's status names another task, or none): acked unanswered. */
  #dropped(task: ParseTask, standing: 'foreign' | 'unqueued'): void {
    const why = standing === 'unqueued' ? 'no coordinator queued its document' : "its document's status names another task";
    this.#options.logger?.warn({ run: task.run_id, doc: task.doc, standing }, `dropped a parse task: ${why} (published under the run id by someone else, or by an earlier coordinator of the run)`);
  }

  /** A failure of the task itself (not a bad document): retried, or recorded for good. */
  async #fail(msg: JsMsg, base: Pick<DocumentStatus, 'run_id' | 'doc'>, failure: ShoalError): Promise<void> {
    // Deliveries of earlier copies (handed back at shutdown) count too: a failing task still ends.
    const deliveries = msg.info.deliveryCount + priorDeliveries(msg.headers);
    if (this.#shutdown.signal.aborted || failure.code === ErrorCode.CANCELLED) {
      // Handed back (requeue.ts): a long scanned document interrupted by a few scale-downs in a row must not be dead-lettered.
      const { js, names, logger } = this.#options;
      await handBack(msg, { js, stream: names.stream, fallbackId: `${base.run_id}.${base.doc}`, what: 'parse task', log: { run: base.run_id, doc: base.doc }, logger });
      return;
    }
    const retry = ERROR_TRAITS[failure.code].delivery === 'nak' && deliveries < this.#options.maxDeliver;
    if (retry) {
      this.#options.logger?.info({ run: base.run_id, doc: base.doc, code: failure.code, deliveries, err: failure.message }, 'parse task failed; redelivering later');
      msg.nak(Math.min(30_000, (this.#options.retryDelayMs ?? 1000) * 2 ** Math.max(0, deliveries - 1)));
      return;
    }
    // For good: a missing or changed object (READ_FAILED), or a retryable failure on its last delivery.
    const code = failure.code === ErrorCode.INVALID_INPUT ? 'READ_FAILED' : failure.code;
    await this.#options.deadLetters.settle(deadSourceOf(msg), failure, code);
    msg.term();
  }

  /** Stops pulling and waits for the documents being parsed. */
  async drain(): Promise<void> {
    this.#stopping = true;
    await this.#loop;
    while (this.#inFlight.size > 0) await Promise.all([...this.#inFlight]);
  }

  /** Stops pulling; tasks not finished yet are handed back for another worker. */
  async close(): Promise<void> {
    this.#shutdown.abort();
    await this.drain();
  }
}
