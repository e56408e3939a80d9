import { headers as natsHeaders, type MsgHdrs } from '@nats-io/transport-node';
import type { JetStreamClient, JetStreamManager, JsMsg } from '@nats-io/jetstream';
import { z } from 'zod';
import type { Logger } from '../../observability/logger.js';
import { ErrorCode, ShoalError, hasErrorCode, serializeError, type SerializedError } from '../../protocol/errors.js';
import { DEAD_LETTER_HEADERS, JobPart, type JobStatus } from '../../protocol/jobs.js';
import type { NatsNames } from '../../protocol/subjects.js';
import { DurableFetchLoop } from '../connection/durable-fetch.js';
import { JS_CODES, isJsApiCode, toNatsShoalError } from '../connection/nats-errors.js';
import type { PartResults } from './part-results.js';
import { decodeJson } from '../rpc/rpc-wire.js';
import { bitmapHas, jobOfPart, type StatusStore } from './status-store.js';
import { advisoryNames } from '../connection/topology.js';
import type { Lifecycle } from '../../protocol/lifecycle.js';

/**
 * Dead letters. A part that cannot succeed is copied, body unchanged, to
 * `<prefix>.dlq.<primitive>.<model>` with the reason in headers (DEAD_LETTER_HEADERS), its job
 * gets an error result and a failed count, and it leaves the work queue:
 * - by the worker itself, on the last allowed delivery of a retryable failure (it knows why);
 * - by the advisory handler, when a part ran out of deliveries without anyone acking it (workers
 *   crashed, or ran past the ack wait). NATS 2.9 leaves such a message in the work-queue stream,
 *   so the handler copies it and deletes it by sequence. The advisories are captured in a stream
 *   (topology.ts), so one raised while no worker was connected is still handled later.
 * The dead letter's shape and publish, and the advisory handling, are this file's for every work
 * queue: parse-dead-letters.ts uses them for parse tasks.
 */

/** Pause of an advisory loop after a failed round. */
const IDLE_RETRY_MS = 1000;

/** The server's max-deliveries advisory (fields Shoal uses). */
const MaxDeliveriesAdvisory = z.looseObject({
  stream: z.string(),
  consumer: z.string(),
  stream_seq: z.number().int().positive(),
  deliveries: z.number().int().nonnegative(),
});
type MaxDeliveriesAdvisory = z.infer<typeof MaxDeliveriesAdvisory>;

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
 * The headers of a dead letter: the original message's own (its message id moved to
 * Shoal-Original-Msg-Id, so the copy is not deduplicated against it) plus the reason, code,
 * original subject, sequence and deliveries.
 */
function deadLetterHeaders(source: DeadSource, reason: SerializedError): MsgHdrs {
  const h = natsHeaders();
  if (source.headers !== undefined) {
    for (const [key, values] of source.headers) {
      if (key.toLowerCase() === 'nats-msg-id') {
        if (values[0] !== undefined) h.set(DEAD_LETTER_HEADERS.messageId, values[0]);
        continue;
      }
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

/** Where one work queue's dead letters go. */
export interface DeadLetterRoute {
  js: JetStreamClient;
  /** The work-queue stream the messages come from: with a message's sequence, its copy's message id. */
  sourceStream: string;
  deadLetterStream: string;
  /** Named in the error when the publish fails (`dead-letter <what> <seq>`). */
  what: string;
}

/**
 * Publishes a dead letter, the one writer of its shape for every work queue (job parts here,
 * parse tasks in parse-dead-letters.ts): the body unchanged, deadLetterHeaders, and the message id
 * `<source stream>.<sequence>`, so the worker and the advisory handler burying the same message
 * store one copy.
 */
export async function publishDeadLetter(route: DeadLetterRoute, subject: string, source: DeadSource, reason: SerializedError): Promise<void> {
  try {
    await route.js.publish(subject, source.data, {
      headers: deadLetterHeaders(source, reason),
      msgID: `${route.sourceStream}.${source.seq}`,
      expect: { streamName: route.deadLetterStream },
    });
  } catch (error) {
    throw toNatsShoalError(error, `dead-letter ${route.what} ${source.seq}`);
  }
}

/** One work queue's max-deliveries advisories, as handleMaxDeliveries reads them. */
export interface MaxDeliveriesHandling {
  js: JetStreamClient;
  jsm: JetStreamManager;
  /** The work-queue stream the advisories are about (others are terminated). */
  stream: string;
  /** Only this consumer's advisories are handled, when given. */
  consumer?: string | undefined;
  /** The stream and durable consumer the advisories are captured in (topology.ts, ingest-store.ts). */
  advisories: { stream: string; consumer: string };
  /** Names the loop in its failure log, and the consumer in the log line of an ignored advisory. */
  what: string;
  consumerWords: string;
  /** The failure a message that ran out of deliveries is settled with. */
  failure(deliveries: number): ShoalError;
  /** Dead-letters the message and settles what it belongs to. */
  settle(source: DeadSource, failure: ShoalError): Promise<unknown>;
  logger?: Logger | undefined;
}

/** Starts the loop that handles a work queue's max-deliveries advisories. */
export function startMaxDeliveriesLoop(handling: MaxDeliveriesHandling): DurableFetchLoop {
  const loop = new DurableFetchLoop({
    js: handling.js,
    stream: handling.advisories.stream,
    consumer: handling.advisories.consumer,
    batch: 16,
    expiresMs: 5_000,
    retryMs: IDLE_RETRY_MS,
    what: handling.what,
    handle: (m) => handleMaxDeliveries(m, handling),
    logger: handling.logger,
  });
  loop.start();
  return loop;
}

/**
 * One advisory: the message it names (if still in the work queue, and if the advisory agrees with
 * the consumer's state) is settled as a failure, then deleted from the stream by sequence.
 */
async function handleMaxDeliveries(m: JsMsg, handling: MaxDeliveriesHandling): Promise<void> {
  const { jsm, stream } = handling;
  const decoded = decodeJson(m.data);
  const advisory = decoded.ok ? MaxDeliveriesAdvisory.safeParse(decoded.value) : null;
  if (advisory?.success !== true || advisory.data.stream !== stream || (handling.consumer !== undefined && advisory.data.consumer !== handling.consumer)) {
    m.term();
    return;
  }
  const { stream_seq: seq, deliveries } = advisory.data;
  let stored;
  try {
    stored = await jsm.streams.getMessage(stream, { seq });
  } catch (error) {
    if (!isJsApiCode(error, JS_CODES.NoMessageFound)) throw error;
    stored = null;
  }
  if (stored !== null) {
    const mismatch = await contradicts(jsm, stream, advisory.data, stored.subject);
    if (mismatch !== null) {
      // Anyone allowed to publish on the advisory subject could forge one; a real one agrees
      // with the consumer's own state. This one does not: the message stays where it is.
      handling.logger?.warn({ seq, deliveries, consumer: advisory.data.consumer, reason: mismatch }, `max-deliveries advisory ignored: it does not match ${handling.consumerWords}`);
      m.term();
      return;
    }
    await handling.settle({ subject: stored.subject, data: stored.data, headers: stored.header, seq, deliveries }, handling.failure(deliveries));
    await jsm.streams.deleteMessage(stream, seq).catch((error: unknown) => {
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
async function contradicts(jsm: JetStreamManager, stream: string, advisory: MaxDeliveriesAdvisory, subject: string): Promise<string | null> {
  let info;
  try {
    info = await jsm.consumers.info(stream, advisory.consumer);
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

export interface DeadLettersOptions {
  js: JetStreamClient;
  jsm: JetStreamManager;
  names: NatsNames;
  results: PartResults;
  status: StatusStore;
  logger?: Logger;
  /**
   * Called for each part the max-deliveries advisory handling buried (its primitive and model, null
   * when the message is not a job part): the worker counts those dead letters as it counts its own.
   */
  onAdvisoryBuried?: (part: { primitive: string; model: string } | null) => void;
}

function jobPartOf(source: DeadSource): JobPart | null {
  const decoded = decodeJson(source.data);
  const part = decoded.ok ? JobPart.safeParse(decoded.value) : null;
  return part?.success === true ? part.data : null;
}

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
    const { js, names } = this.#options;
    await publishDeadLetter({ js, sourceStream: names.jobsStream, deadLetterStream: names.deadLetterStream, what: 'message' }, this.#deadSubject(source.subject), source, reason);
    this.#options.logger?.warn({ subject: source.subject, seq: source.seq, code: reason.code, reason: reason.message }, 'part dead-lettered');
  }

  /**
   * Buries a part and settles its job: an error result and a failed count, unless the part was
   * already counted (it finished; only its ack was lost), in which case nothing is buried.
   */
  settle(source: DeadSource, failure: unknown): Promise<'buried' | 'finished-before'> {
    return this.#settle(source, jobPartOf(source), failure);
  }

  /** settle() with the message already read as a job part (null: it is none). */
  async #settle(source: DeadSource, part: JobPart | null, failure: unknown): Promise<'buried' | 'finished-before'> {
    let status: JobStatus | null = null;
    try {
      if (part !== null) status = await jobOfPart(this.#options.status, part);
    } catch (error) {
      if (!hasErrorCode(error, ErrorCode.JOB_CONFLICT)) throw error;
      // Its job id names another job, or no job status: buried with that reason, nothing counted.
      await this.bury(source, serializeError(error));
      return 'buried';
    }
    if (part !== null && bitmapHas(status?.counted_parts, part.part)) return 'finished-before';
    await this.bury(source, serializeError(failure));
    if (part !== null) await this.#options.results.failed(part, failure);
    return 'buried';
  }

  /** Starts handling max-deliveries advisories (every worker runs one; each advisory reaches one). */
  start(): void {
    if (this.#loop !== null) return;
    const { js, jsm, names, logger } = this.#options;
    this.#loop = startMaxDeliveriesLoop({
      js,
      jsm,
      stream: names.jobsStream,
      advisories: advisoryNames(names),
      what: 'dead-letter advisory handling',
      consumerWords: 'the consumer',
      failure: (deliveries) =>
        new ShoalError(ErrorCode.TIMEOUT, `delivered ${deliveries} times without an ack (max_deliver): the workers holding it stopped, or ran past the ack wait`),
      settle: async (source, failure) => {
        const part = jobPartOf(source);
        const outcome = await this.#settle(source, part, failure);
        if (outcome === 'buried') this.#options.onAdvisoryBuried?.(part === null ? null : { primitive: part.primitive, model: part.model });
        return outcome;
      },
      logger,
    });
  }

  /** Stops the advisory handler after the batch in hand. */
  async drain(): Promise<void> {
    await this.#loop?.drain();
  }

  close(): Promise<void> {
    return this.drain();
  }
}
