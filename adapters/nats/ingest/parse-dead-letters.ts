import type { JetStreamClient, JetStreamManager } from '@nats-io/jetstream';
import type { Logger } from '../../observability/logger.js';
import { ErrorCode, serializeError, ShoalError } from '../../protocol/errors.js';
import { ParseTask, type DocumentStatus } from '../../protocol/ingest.js';
import { WIRE_VERSION } from '../../protocol/jobs.js';
import type { Lifecycle } from '../../protocol/lifecycle.js';
import { publishDeadLetter, startMaxDeliveriesLoop, type DeadSource } from '../jobs/dead-letter.js';
import type { DurableFetchLoop } from '../connection/durable-fetch.js';
import type { IngestNames, IngestStatusStore } from './ingest-store.js';
import { parseTaskCheck } from './parse-task-token.js';
import { writeAnswer } from './parse-task-standing.js';
import { decodeJson } from '../rpc/rpc-wire.js';

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
 * The dead letter's shape, its publish and the advisory handling are dead-letter.ts's; this file
 * holds only what a parse task adds (its document's `failed` state).
 */

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
   * Dead-letters a task and marks its document failed with `code`, when its document is queued
   * for this task (not when it was answered already: only an ack was lost; nor when the status
   * names another task). Idempotent per stream sequence.
   */
  async settle(source: DeadSource, failure: ShoalError, code: string = failure.code): Promise<void> {
    const { js, names, status, logger } = this.#options;
    const reason = serializeError(failure);
    await publishDeadLetter({ js, sourceStream: names.stream, deadLetterStream: names.deadLetterStream, what: 'parse task' }, names.deadLetterSubject, source, reason);
    logger?.warn({ seq: source.seq, code: reason.code, reason: reason.message }, 'parse task dead-lettered');
    const decoded = decodeJson(source.data);
    const task = decoded.ok ? ParseTask.safeParse(decoded.value) : null;
    if (task?.success !== true) return;
    const { run_id: run, doc, source: name, document_id: documentId } = task.data;
    const check = parseTaskCheck(task.data);
    const failed: DocumentStatus = {
      ...(check === undefined ? {} : { task: check }),
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
    // Only over the task's own `queued` status: a forged or superseded task fails no document.
    await writeAnswer(status, task.data, failed);
  }

  /** Starts handling the parse consumer's max-deliveries advisories. */
  start(): void {
    if (this.#loop !== null) return;
    const { js, jsm, names, logger } = this.#options;
    this.#loop = startMaxDeliveriesLoop({
      js,
      jsm,
      stream: names.stream,
      consumer: names.parseConsumer,
      advisories: { stream: names.advisoryStream, consumer: names.advisoryConsumer },
      what: 'parse dead-letter advisory handling',
      consumerWords: 'the parse consumer',
      failure: (deliveries) =>
        new ShoalError(ErrorCode.TIMEOUT, `parse task delivered ${deliveries} times without an ack (max_deliver): it stopped or crashed every worker that took it`),
      settle: (source, failure) => this.settle(source, failure),
      logger,
    });
  }

  async drain(): Promise<void> {
    await this.#loop?.drain();
  }

  close(): Promise<void> {
    return this.drain();
  }
}
