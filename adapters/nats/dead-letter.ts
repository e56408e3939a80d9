import { headers as natsHeaders, type MsgHdrs } from '@nats-io/transport-node';
import type { JetStreamClient, JetStreamManager, JsMsg } from '@nats-io/jetstream';
import { z } from 'zod';
import type { Logger } from '../observability/logger.js';
import { ErrorCode, ShoalError, serializeError, type SerializedError } from '../protocol/errors.js';
import { DEAD_LETTER_HEADERS, JobPart } from '../protocol/jobs.js';
import type { NatsNames } from '../protocol/subjects.js';
import { DurableFetchLoop } from './durable-fetch.js';
import { JS_CODES, isJsApiCode, toNatsShoalError } from './nats-errors.js';
import type { PartResults } from './part-results.js';
import { decodeJson } from './rpc-wire.js';
import type { StatusStore } from './status-store.js';
import { advisoryNames } from './topology.js';
import type { Lifecycle } from '../protocol/lifecycle.js';

/**
 * Dead letters. A part that cannot succeed is copied, body unchanged, to
 * `<prefix>.dlq.<primitive>.<model>` with the reason in headers (DEAD_LETTER_HEADERS), its job
 * gets an error result and a failed count, and it leaves the work queue:
 * - by the worker itself, on the last allowed delivery of a retryable failure (it knows why);
 * - by the advisory handler, when a part ran out of deliveries without anyone acking it (workers
 *   crashed, or ran past the ack wait). NATS 2.9 leaves such a message in the work-queue stream,
 *   so the handler copies it and deletes it by sequence. The advisories are captured in a stream
 *   (topology.ts), so one raised while no worker was connected is still handled later.
 */

/** The server's max-deliveries advisory (fields Shoal uses). */
const MaxDeliveriesAdvisory = z.looseObject({
  stream: z.string(),
  consumer: z.string(),
  stream_seq: z.number().int().positive(),
  deliveries: z.number().int().nonnegative(),
});

/** What a dead letter is made of: a delivered message, or one read back from the stream. */
export interface DeadSource {
  subject: string;
  data: Uint8Array;
  headers?: MsgHdrs | undefined;
  seq: number;
  deliveries: number;
}

export function deadSourceOf(msg: JsMsg): DeadSource {
  return { subject: msg.subject, data: msg.data, headers: msg.headers, seq: msg.seq, deliveries: msg.info.deliveryCount };
}

/**
 * The headers of a dead letter: the original message's own (less its message id, so the copy is
 * not deduplicated against it) plus the reason, code, original subject, sequence and deliveries.
 * Shared by every dead-letter writer (job parts here, parse tasks in parse-dead-letters.ts).
 */
export function deadLetterHeaders(source: DeadSource, reason: SerializedError): MsgHdrs {
  const h = natsHeaders();
  if (source.headers !== undefined) {
    for (const [key, values] of source.headers) {
      if (key.toLowerCase() === 'nats-msg-id') continue;
      for (const value of values) h.append(key, value);
    }
  }
  h.set(DEAD_LETTER_HEADERS.reason, reason.message.replace(/[\r\n]+/g, ' ').slice(0, 1024));
  h.set(DEAD_LETTER_HEADERS.code, reason.code);
  h.set(DEAD_LETTER_HEADERS.subject, source.subject);
  h.set(DEAD_LETTER_HEADERS.sequence, String(source.seq));
  h.set(DEAD_LETTER_HEADERS.deliveries, String(source.deliveries));
  return h;
}

export interface DeadLettersOptions {
  js: JetStreamClient;
  jsm: JetStreamManager;
  names: NatsNames;
  results: PartResults;
  status: StatusStore;
  logger?: Logger;
}

const IDLE_RETRY_MS = 1000;

export class DeadLetters implements Lifecycle {
  readonly #options: DeadLettersOptions;
  #loop: DurableFetchLoop | null = null;

  constructor(options: DeadLettersOptions) {
    this.#options = options;
  }

  #deadSubject(subject: string): string {
    const { prefix } = this.#options.names;
    const jobs = `${prefix}.jobs.`;
    return subject.startsWith(jobs) ? `${prefix}.dlq.${subject.slice(jobs.length)}` : `${prefix}.dlq.unknown`;
  }

  /** Copies a message to the dead-letter stream with the reason (idempotent per stream sequence). */
  async bury(source: DeadSource, reason: SerializedError): Promise<void> {
    const h = deadLetterHeaders(source, reason);
    const { js, names } = this.#options;
    try {
      await js.publish(this.#deadSubject(source.subject), source.data, {
        headers: h,
        msgID: `${names.jobsStream}.${source.seq}`,
        expect: { streamName: names.deadLetterStream },
      });
    } catch (error) {
      throw toNatsShoalError(error, `dead-letter message ${source.seq}`);
    }
    this.#options.logger?.warn({ subject: source.subject, seq: source.seq, code: reason.code, reason: reason.message }, 'part dead-lettered');
  }

  /**
   * Buries a part and settles its job: an error result and a failed count, unless the part was
   * already counted (it finished; only its ack was lost), in which case nothing is buried.
   */
  async settle(source: DeadSource, failure: unknown): Promise<'buried' | 'finished-before'> {
    const reason = serializeError(failure);
    const decoded = decodeJson(source.data);
    const part = decoded.ok ? JobPart.safeParse(decoded.value) : null;
    if (part?.success === true && (await this.#options.status.isCounted(part.data.job_id, part.data.part))) return 'finished-before';
    await this.bury(source, reason);
    if (part?.success === true) await this.#options.results.failed(part.data, failure);
    return 'buried';
  }

  /** Starts handling max-deliveries advisories (every worker runs one; each advisory reaches one). */
  start(): void {
    if (this.#loop !== null) return;
    const advisories = advisoryNames(this.#options.names);
    this.#loop = new DurableFetchLoop({
      js: this.#options.js,
      stream: advisories.stream,
      consumer: advisories.consumer,
      batch: 16,
      expiresMs: 5_000,
      retryMs: IDLE_RETRY_MS,
      what: 'dead-letter advisory handling',
      handle: (m) => this.#handleAdvisory(m),
      logger: this.#options.logger,
    });
    this.#loop.start();
  }

  async #handleAdvisory(m: JsMsg): Promise<void> {
    const { jsm, names } = this.#options;
    const decoded = decodeJson(m.data);
    const advisory = decoded.ok ? MaxDeliveriesAdvisory.safeParse(decoded.value) : null;
    if (advisory?.success !== true || advisory.data.stream !== names.jobsStream) {
      m.term();
      return;
    }
    const { stream_seq: seq, deliveries } = advisory.data;
    let stored;
    try {
      stored = await jsm.streams.getMessage(names.jobsStream, { seq });
    } catch (error) {
      if (!isJsApiCode(error, JS_CODES.NoMessageFound)) throw error;
      stored = null;
    }
    if (stored !== null) {
      const mismatch = await this.#contradicts(advisory.data, stored.subject);
      if (mismatch !== null) {
        // Anyone allowed to publish on the advisory subject could forge one; a real one agrees
        // with the consumer's own state. This one does not: the part stays where it is.
        this.#options.logger?.warn({ seq, consumer: advisory.data.consumer, reason: mismatch }, 'max-deliveries advisory ignored: it does not match the consumer');
        m.term();
        return;
      }
      const failure = new ShoalError(
        ErrorCode.TIMEOUT,
        `delivered ${deliveries} times without an ack (max_deliver): the workers holding it stopped, or ran past the ack wait`,
      );
      await this.settle({ subject: stored.subject, data: stored.data, headers: stored.header, seq, deliveries }, failure);
      await jsm.streams.deleteMessage(names.jobsStream, seq).catch((error: unknown) => {
        if (!isJsApiCode(error, JS_CODES.NoMessageFound)) throw error;
      });
    }
    await m.ackAck();
  }

  /**
   * Why an advisory cannot be true of the consumer it names, or null when it can: the consumer
   * must be the one of the message's subject, have that max_deliver, and have delivered the
   * message (its sequence between the ack floor and the last delivered one).
   */
  async #contradicts(advisory: z.infer<typeof MaxDeliveriesAdvisory>, subject: string): Promise<string | null> {
    const { jsm, names } = this.#options;
    let info;
    try {
      info = await jsm.consumers.info(names.jobsStream, advisory.consumer);
    } catch (error) {
      if (isJsApiCode(error, JS_CODES.ConsumerNotFound)) return `consumer ${advisory.consumer} does not exist`;
      throw error;
    }
    if (info.config.filter_subject !== undefined && info.config.filter_subject !== subject) {
      return `message ${advisory.stream_seq} is on ${subject}, not on the consumer's ${info.config.filter_subject}`;
    }
    if (info.config.max_deliver !== undefined && info.config.max_deliver > 0 && advisory.deliveries < info.config.max_deliver) {
      return `${advisory.deliveries} deliveries is below the consumer's max_deliver ${info.config.max_deliver}`;
    }
    if (advisory.stream_seq > info.delivered.stream_seq) return `message ${advisory.stream_seq} was never delivered (last delivered ${info.delivered.stream_seq})`;
    if (advisory.stream_seq <= info.ack_floor.stream_seq) return `message ${advisory.stream_seq} is below the ack floor ${info.ack_floor.stream_seq}`;
    return null;
  }

  /** Stops the advisory handler after the batch in hand. */
  async drain(): Promise<void> {
    await this.#loop?.drain();
  }

  close(): Promise<void> {
    return this.drain();
  }
}
