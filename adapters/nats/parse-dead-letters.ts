import type { JetStreamClient, JetStreamManager, JsMsg } from '@nats-io/jetstream';
import { z } from 'zod';
import type { Logger } from '../observability/logger.js';
import { ErrorCode, serializeError, ShoalError } from '../protocol/errors.js';
import { ParseTask, type DocumentStatus } from '../protocol/ingest.js';
import { WIRE_VERSION } from '../protocol/jobs.js';
import type { Lifecycle } from '../protocol/lifecycle.js';
import { deadLetterHeaders, type DeadSource } from './dead-letter.js';
import { DurableFetchLoop } from './durable-fetch.js';
import type { IngestNames, IngestStatusStore } from './ingest-store.js';
import { JS_CODES, isJsApiCode, toNatsShoalError } from './nats-errors.js';
import { decodeJson } from './rpc-wire.js';

/**
 * Poison parse tasks, as dead-letter.ts handles job parts: a task that cannot succeed is copied,
 * body unchanged, to `<prefix>.dlq.ingest.parse` with the reason in headers
 * (DEAD_LETTER_HEADERS), and its document is recorded `failed` with a code in the ingest KV
 * bucket, so the coordinator's run finishes (exit 3) instead of waiting for it:
 * - by the parse worker, when the task fails for good (a missing object, a retryable failure on
 *   its last delivery);
 * - by the advisory handler, when the task ran out of deliveries without an ack (it killed or
 *   stalled every worker that took it). NATS 2.9 leaves such a message in the work-queue stream:
 *   the handler copies it and deletes it by sequence. Coordinators and parse workers both run it.
 */

const MaxDeliveriesAdvisory = z.looseObject({
  stream: z.string(),
  consumer: z.string(),
  stream_seq: z.number().int().positive(),
  deliveries: z.number().int().nonnegative(),
});

export interface ParseDeadLettersOptions {
  js: JetStreamClient;
  jsm: JetStreamManager;
  names: IngestNames;
  status: IngestStatusStore;
  logger?: Logger | undefined;
}

export class ParseDeadLetters implements Lifecycle {
  readonly #options: ParseDeadLettersOptions;
  #loop: DurableFetchLoop | null = null;

  constructor(options: ParseDeadLettersOptions) {
    this.#options = options;
  }

  /**
   * Dead-letters a task and marks its document failed with `code` (unless it already reached
   * a later state: only an ack was lost). Idempotent per stream sequence.
   */
  async settle(source: DeadSource, failure: ShoalError, code: string = failure.code): Promise<void> {
    const { js, names, status, logger } = this.#options;
    const reason = serializeError(failure);
    try {
      await js.publish(names.deadLetterSubject, source.data, {
        headers: deadLetterHeaders(source, reason),
        msgID: `${names.stream}.${source.seq}`,
        expect: { streamName: names.deadLetterStream },
      });
    } catch (error) {
      throw toNatsShoalError(error, `dead-letter parse task ${source.seq}`);
    }
    logger?.warn({ seq: source.seq, code: reason.code, reason: reason.message }, 'parse task dead-lettered');
    const decoded = decodeJson(source.data);
    const task = decoded.ok ? ParseTask.safeParse(decoded.value) : null;
    if (task?.success !== true) return;
    const { run_id: run, doc, source: name, document_id: documentId } = task.data;
    const existing = await status.document(run, doc);
    if (existing !== null && existing.state !== 'queued') return;
    const failed: DocumentStatus = {
      v: WIRE_VERSION,
      run_id: run,
      doc,
      source: name,
      document_id: documentId,
      state: 'failed',
      code: code.slice(0, 64),
      reason: `${reason.message} (dead-lettered to ${names.deadLetterSubject})`.slice(0, 2048),
      updated_at: new Date().toISOString(),
    };
    await status.putDocument(failed);
  }

  /** Starts handling the parse consumer's max-deliveries advisories. */
  start(): void {
    if (this.#loop !== null) return;
    const { js, names, logger } = this.#options;
    this.#loop = new DurableFetchLoop({
      js,
      stream: names.advisoryStream,
      consumer: names.advisoryConsumer,
      batch: 16,
      expiresMs: 5_000,
      retryMs: 1_000,
      what: 'parse dead-letter advisory handling',
      handle: (m) => this.#handleAdvisory(m),
      logger,
    });
    this.#loop.start();
  }

  async #handleAdvisory(m: JsMsg): Promise<void> {
    const { jsm, names } = this.#options;
    const decoded = decodeJson(m.data);
    const advisory = decoded.ok ? MaxDeliveriesAdvisory.safeParse(decoded.value) : null;
    if (advisory?.success !== true || advisory.data.stream !== names.stream || advisory.data.consumer !== names.parseConsumer) {
      m.term();
      return;
    }
    const { stream_seq: seq, deliveries } = advisory.data;
    let stored;
    try {
      stored = await jsm.streams.getMessage(names.stream, { seq });
    } catch (error) {
      if (!isJsApiCode(error, JS_CODES.NoMessageFound)) throw error;
      stored = null;
    }
    if (stored !== null) {
      const info = await jsm.consumers.info(names.stream, names.parseConsumer);
      // A forged advisory (anyone may publish on its subject) does not match the consumer's own state.
      const real = deliveries >= (info.config.max_deliver ?? 1) && seq <= info.delivered.stream_seq && seq > info.ack_floor.stream_seq;
      if (!real) {
        this.#options.logger?.warn({ seq, deliveries }, 'max-deliveries advisory ignored: it does not match the parse consumer');
        m.term();
        return;
      }
      const failure = new ShoalError(
        ErrorCode.TIMEOUT,
        `parse task delivered ${deliveries} times without an ack (max_deliver): it stopped or crashed every worker that took it`,
      );
      await this.settle({ subject: stored.subject, data: stored.data, headers: stored.header, seq, deliveries }, failure);
      await jsm.streams.deleteMessage(names.stream, seq).catch((error: unknown) => {
        if (!isJsApiCode(error, JS_CODES.NoMessageFound)) throw error;
      });
    }
    await m.ackAck();
  }

  async drain(): Promise<void> {
    await this.#loop?.drain();
  }

  close(): Promise<void> {
    return this.drain();
  }
}
