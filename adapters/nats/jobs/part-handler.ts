import type { JetStreamClient, JsMsg } from '@nats-io/jetstream';
import type { Logger } from '../../observability/logger.js';
import type { Engine } from '../../protocol/engine.js';
import { ERROR_TRAITS, ErrorCode, ShoalError, hasErrorCode, isShoalError, serializeError, toShoalError } from '../../protocol/errors.js';
import { JobPart, type JobStatus } from '../../protocol/jobs.js';
import type { NatsNames } from '../../protocol/subjects.js';
import { parseWith } from '../../protocol/validate.js';
import { deadSourceOf, type DeadLetters } from './dead-letter.js';
import { itemCount, runPrimitive, shiftIndexes } from '../rpc/dispatch.js';
import type { PartResults } from './part-results.js';
import { getJson, type PayloadStore } from '../connection/payloads.js';
import { handBack, priorDeliveries } from './requeue.js';
import { decodeJson } from '../rpc/rpc-wire.js';
import { TERMINAL_STATES, bitmapHas, jobOfPart, type StatusStore } from './status-store.js';

/**
 * What happens to one delivered job part. The message is acked only after its result is durably
 * published and counted; the error table (ERROR_TRAITS.delivery) decides the rest:
 * - term: an error result, then term() (invalid input never succeeds on a retry);
 * - nak: nak with a growing delay, until the last allowed delivery, which dead-letters it;
 * - a part interrupted by this worker's shutdown (the drain deadline passed) is handed back:
 *   published again as a fresh message, then acked (requeue.ts), so shutdowns never use up its
 *   deliveries; deliveries earlier copies used still count (Shoal-Prior-Deliveries);
 * - a part whose model is still loading here just waits for the load (the pull loop's working()
 *   keeps the delivery alive), instead of a nak that would use up a delivery.
 * A message that is not a job part at all is dead-lettered and terminated.
 */

/** What became of a delivery; `requeue`: handed back to the queue as a fresh copy (shutdown). */
export const DISPOSITIONS = ['ack', 'nak', 'term', 'dead', 'requeue'] as const;
export type Disposition = (typeof DISPOSITIONS)[number];

export interface PartHandlerOptions {
  engine: Engine;
  /** Publishes the copy of a part handed back at shutdown. */
  js: Pick<JetStreamClient, 'publish'>;
  names: NatsNames;
  results: PartResults;
  status: StatusStore;
  payloads: PayloadStore;
  deadLetters: DeadLetters;
  /** Deliveries allowed by the consumer (max_deliver). */
  maxDeliver: number;
  /** First redelivery delay of a retryable failure; doubles per delivery up to maxRetryDelayMs. @default 1000 */
  retryDelayMs?: number;
  /** @default 30000 */
  maxRetryDelayMs?: number;
  /** A part running longer fails with TIMEOUT (and is retried). @default 600000 */
  partTimeoutMs?: number;
  /** Times a part may be handed back at shutdown; past it an interruption is nak'ed (and counts). @default 20 */
  maxRequeues?: number;
  logger?: Logger;
}

export class PartHandler {
  readonly #options: PartHandlerOptions;

  constructor(options: PartHandlerOptions) {
    this.#options = options;
  }

  #retryDelay(deliveries: number): number {
    const first = this.#options.retryDelayMs ?? 1000;
    return Math.min(this.#options.maxRetryDelayMs ?? 30_000, first * 2 ** Math.max(0, deliveries - 1));
  }

  #decode(msg: JsMsg): JobPart {
    const decoded = decodeJson(msg.data);
    if (!decoded.ok) throw new ShoalError(ErrorCode.INVALID_INPUT, `the job message is not JSON: ${decoded.reason}`);
    const part = parseWith(JobPart, decoded.value, 'job part');
    const expected = this.#options.names.jobs(part.primitive, part.model);
    if (msg.subject !== expected) {
      throw new ShoalError(ErrorCode.INVALID_INPUT, `part ${part.part} of job ${part.job_id} (${part.primitive} on model "${part.model}") was published on ${msg.subject}, not ${expected}`);
    }
    return part;
  }

  /** Handles one delivery; `signal` aborts when the worker shuts down. Never throws for the part's own failures. */
  async handle(msg: JsMsg, signal: AbortSignal): Promise<Disposition> {
    let part: JobPart;
    try {
      part = this.#decode(msg);
    } catch (error) {
      await this.#options.deadLetters.bury(deadSourceOf(msg), serializeError(error));
      msg.term();
      return 'term';
    }
    // Deliveries of this message plus those of the copies before it (a part handed back at shutdown).
    const deliveries = msg.info.deliveryCount + priorDeliveries(msg.headers);
    let status: JobStatus | null;
    try {
      status = await jobOfPart(this.#options.status, part);
    } catch (error) {
      if (!hasErrorCode(error, ErrorCode.JOB_CONFLICT)) throw error;
      // A part that cannot be counted in what its job id names: buried, the job left untouched.
      await this.#options.deadLetters.bury(deadSourceOf(msg), serializeError(error));
      msg.term();
      return 'term';
    }
    if (status !== null && (bitmapHas(status.counted_parts, part.part) || TERMINAL_STATES.has(status.state))) {
      // Finished by an earlier delivery whose ack was lost, or its job already ended (deadline).
      await msg.ackAck();
      return 'ack';
    }
    const timeoutMs = this.#options.partTimeoutMs ?? 600_000;
    const timeout = AbortSignal.timeout(timeoutMs);
    try {
      const request = part.request ?? (part.payload_ref === undefined ? undefined : await getJson(this.#options.payloads, part.payload_ref));
      // A store target that cannot be written (its obj:// bucket is missing) fails before the inference.
      if (part.result.kind === 'store') await this.#options.payloads.checkTarget(part.result.uri);
      if (status === null || status.state === 'queued') await this.#options.status.markRunning(part, itemCount(request));
      const result = await runPrimitive(this.#options.engine, {
        primitive: part.primitive,
        model: part.model,
        request,
        priority: 'bulk',
        signal: AbortSignal.any([signal, timeout]),
        // Index rows store each item's text; other targets keep results to the vectors.
        inputTexts: part.result.kind === 'index',
      });
      await this.#options.results.ok(part, shiftIndexes(result, part.offset ?? 0), request);
      await msg.ackAck();
      return 'ack';
    } catch (error) {
      // Shutting down: the part goes back to the queue for another worker, without using up a
      // delivery. A failure that would end the part anyway (invalid input) is still settled.
      if (signal.aborted && !(isShoalError(error) && error.code !== ErrorCode.CANCELLED && ERROR_TRAITS[error.code].delivery === 'term')) {
        const { js, names, maxRequeues, logger } = this.#options;
        return handBack(msg, { js, stream: names.jobsStream, fallbackId: `${part.job_id}.${part.part}`, what: 'part', log: { job: part.job_id, part: part.part }, maxRequeues, logger });
      }
      const failure = timeout.aborted ? new ShoalError(ErrorCode.TIMEOUT, `the part ran longer than ${timeoutMs} ms`, { cause: error }) : toShoalError(error);
      return this.#fail(msg, part, failure, deliveries);
    }
  }

  async #fail(msg: JsMsg, part: JobPart, failure: ShoalError, deliveries: number): Promise<Disposition> {
    const log = { job: part.job_id, part: part.part, code: failure.code, deliveries };
    switch (ERROR_TRAITS[failure.code].delivery) {
      case 'term':
        this.#options.logger?.warn({ ...log, err: failure.message }, 'part failed for good');
        await this.#options.results.failed(part, failure);
        msg.term();
        return 'term';
      case 'ack':
        await msg.ackAck();
        return 'ack';
      case 'nak':
        if (deliveries >= this.#options.maxDeliver) {
          await this.#options.deadLetters.settle({ ...deadSourceOf(msg), deliveries }, failure);
          msg.term();
          return 'dead';
        }
        this.#options.logger?.info({ ...log, err: failure.message }, 'part failed; redelivering later');
        msg.nak(this.#retryDelay(deliveries));
        return 'nak';
    }
  }
}
