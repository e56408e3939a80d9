import { headers as natsHeaders, type MsgHdrs } from '@nats-io/transport-node';
import type { JetStreamClient, JsMsg, PubAck } from '@nats-io/jetstream';
import type { Logger } from '../../observability/logger.js';
import { toNatsShoalError } from '../connection/nats-errors.js';

/**
 * Handing a job part back to the work queue without spending one of its deliveries. JetStream
 * counts every delivery toward max_deliver, a nak included, so a part that a worker's shutdown
 * interrupted (the drain deadline passed) would use one up each time, and a few restarts would
 * dead-letter a healthy part. Instead the worker publishes the same message again (same body,
 * same headers) as a new message, waits for its PubAck, and only then acks the interrupted
 * delivery: the copy starts at delivery 1. Nothing can be lost (the copy is stored before the
 * original goes) and nothing is counted twice (a part is counted once in its job's status, and
 * its result is deduplicated by `<job>.<part>`, whichever copy finishes it).
 *
 * The copy carries:
 * - `Nats-Msg-Id: <original id>.requeue.<n>`: a new id, or the stream's duplicate window would
 *   drop it as the original; the same interruption requeued twice yields the same id, so one copy;
 * - `Shoal-Requeues: n`: how many times the part was handed back; past a bound the worker naks
 *   instead (a part cannot bounce between restarting workers forever);
 * - `Shoal-Prior-Deliveries`: the deliveries earlier copies used before the interrupted one
 *   (failures, crashes), which still count toward max_deliver: the worker adds them to the copy's
 *   own delivery count, so a part that genuinely fails is still dead-lettered after max_deliver.
 */

export const REQUEUE_HEADERS = Object.freeze({
  count: 'Shoal-Requeues',
  priorDeliveries: 'Shoal-Prior-Deliveries',
});

/** Times a part may be handed back before an interruption is nak'ed (and counts) like a failure. */
export const DEFAULT_MAX_REQUEUES = 20;

const MSG_ID_HEADER = 'Nats-Msg-Id';
/** Header values above this are not trusted (a forged header cannot overflow anything). */
const MAX_HEADER_COUNT = 1_000_000;

/** The message that is handed back: what a delivered JsMsg holds. */
export interface RequeueSource {
  subject: string;
  data: Uint8Array;
  headers?: MsgHdrs | undefined;
  /** Deliveries of this message so far, the interrupted one included. */
  deliveries: number;
}

function headerCount(headers: MsgHdrs | undefined, name: string): number {
  const raw = headers?.get(name) ?? '';
  if (!/^\d{1,7}$/.test(raw)) return 0;
  return Math.min(MAX_HEADER_COUNT, Number(raw));
}

/** How many times this message's part was handed back already (0 for a part as submitted). */
export function requeueCount(headers: MsgHdrs | undefined): number {
  return headerCount(headers, REQUEUE_HEADERS.count);
}

/** Deliveries the part used in earlier copies (0 for a part as submitted). */
export function priorDeliveries(headers: MsgHdrs | undefined): number {
  return headerCount(headers, REQUEUE_HEADERS.priorDeliveries);
}

/** `<original id>.requeue.<count>`; the original id is the submitted one (`fallback` when the message has none). */
export function requeueMessageId(headers: MsgHdrs | undefined, fallback: string, count: number): string {
  const original = (headers?.get(MSG_ID_HEADER) ?? '').replace(/\.requeue\.\d+$/, '');
  return `${original === '' ? fallback : original}.requeue.${count}`;
}

/** The copy's headers: the original's, less its message id and requeue counters, plus the new counters. */
export function requeueHeaders(source: RequeueSource, count: number): MsgHdrs {
  const own = new Set([MSG_ID_HEADER, REQUEUE_HEADERS.count, REQUEUE_HEADERS.priorDeliveries].map((name) => name.toLowerCase()));
  const h = natsHeaders();
  if (source.headers !== undefined) {
    for (const [key, values] of source.headers) {
      if (own.has(key.toLowerCase())) continue;
      for (const value of values) h.append(key, value);
    }
  }
  h.set(REQUEUE_HEADERS.count, String(count));
  const prior = priorDeliveries(source.headers) + Math.max(0, source.deliveries - 1);
  h.set(REQUEUE_HEADERS.priorDeliveries, String(Math.min(MAX_HEADER_COUNT, prior)));
  return h;
}

/**
 * Publishes the copy on the message's own subject and resolves once the stream stored it (a
 * duplicate PubAck means this very copy was stored before: equally safe). The caller acks the
 * original only after this resolves; on a rejection (ShoalError) it naks instead.
 */
export async function publishRequeue(js: Pick<JetStreamClient, 'publish'>, stream: string, source: RequeueSource, fallbackId: string): Promise<PubAck> {
  const count = requeueCount(source.headers) + 1;
  try {
    return await js.publish(source.subject, source.data, {
      headers: requeueHeaders(source, count),
      msgID: requeueMessageId(source.headers, fallbackId, count),
      expect: { streamName: stream },
    });
  } catch (error) {
    throw toNatsShoalError(error, `requeue a part on ${source.subject}`);
  }
}

export interface HandBackOptions {
  js: Pick<JetStreamClient, 'publish'>;
  /** The work-queue stream the message came from. */
  stream: string;
  /** The copy's message id when the original carries none (`<job>.<part>`, `<run>.<doc>`). */
  fallbackId: string;
  /** Names the message in logs (`part`, `parse task`) and tags its log lines. */
  what: string;
  log: Record<string, unknown>;
  /** @default DEFAULT_MAX_REQUEUES */
  maxRequeues?: number | undefined;
  logger?: Logger | undefined;
}

/**
 * A delivery its worker's shutdown interrupted: a fresh copy is published and, once stored, this
 * delivery is acked ('requeue'). Past `maxRequeues`, or when the copy cannot be published (NATS
 * going away), it is nak'ed instead ('nak'), which counts toward max_deliver. Should the ack be
 * lost, the original comes back after the ack wait too: the work may run twice, and is counted
 * once (status bitmap, result message id, document state).
 */
export async function handBack(msg: JsMsg, options: HandBackOptions): Promise<'requeue' | 'nak'> {
  const log = { ...options.log, deliveries: msg.info.deliveryCount, requeues: requeueCount(msg.headers) };
  if (requeueCount(msg.headers) >= (options.maxRequeues ?? DEFAULT_MAX_REQUEUES)) {
    options.logger?.warn(log, `${options.what} interrupted too many times; nak (counts as a delivery)`);
    msg.nak();
    return 'nak';
  }
  try {
    await publishRequeue(options.js, options.stream, { subject: msg.subject, data: msg.data, headers: msg.headers, deliveries: msg.info.deliveryCount }, options.fallbackId);
  } catch (error) {
    options.logger?.warn({ ...log, err: String(error) }, `could not hand an interrupted ${options.what} back; nak`);
    msg.nak();
    return 'nak';
  }
  await msg.ackAck().catch((error: unknown) => options.logger?.warn({ ...log, err: String(error) }, `ack of a ${options.what} handed back failed`));
  options.logger?.info(log, `interrupted ${options.what} handed back to the queue`);
  return 'requeue';
}
