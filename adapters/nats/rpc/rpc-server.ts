import { setMaxListeners } from 'node:events';
import { headers as natsHeaders, type Msg, type NatsConnection, type Subscription } from '@nats-io/transport-node';
import type { Logger } from '../../observability/logger.js';
import type { Engine } from '../../protocol/engine.js';
import { ErrorCode, ShoalError, serializeError } from '../../protocol/errors.js';
import { WIRE_VERSION, type RpcReply, type WorkerInfo } from '../../protocol/jobs.js';
import type { NatsNames, Primitive, RpcOperation } from '../../protocol/subjects.js';
import { runOperation } from './dispatch.js';
import { PACKED_FORMAT, PACKED_HEADERS, packReply } from './packed-vectors.js';
import { RPC_HEADERS, callerTimeout, decodeJson, encodeJson, packedHeaders } from './rpc-wire.js';
import type { Lifecycle } from '../../protocol/lifecycle.js';

/**
 * The worker side of request-reply. Every worker joins one queue group on
 * - `serving.<primitive>.<model>` for each model it serves (it loads the model if needed), and
 * - `resident.<primitive>.<model>` for each model it holds right now (kept in step with the pool
 *   through setResident), so a caller's first try reaches a worker that will not load anything;
 * and answers the discovery subject with what it serves and holds. Requests run in the engine's
 * interactive lane, aborted when the caller's timeout (a header) has passed. Besides the routes'
 * primitives, every model served answers `tokenize` too (request-reply only: it has no job form).
 */

export const DEFAULT_MAX_IN_FLIGHT_ITEMS = 4096;

/** Items a request asks for (its `items` array), for the capacity check; 1 when it has none. */
function requestItems(value: unknown): number {
  if (typeof value !== 'object' || value === null || !('items' in value)) return 1;
  return Array.isArray(value.items) ? Math.max(1, value.items.length) : 1;
}

export interface Route {
  primitive: Primitive;
  model: string;
}

/** A subscription's operation and model. */
interface RpcRoute {
  operation: RpcOperation;
  model: string;
}

export interface RpcServerOptions {
  nc: NatsConnection;
  names: NatsNames;
  engine: Engine;
  workerId: string;
  routes: readonly Route[];
  /** Models resident now, for discovery answers. */
  resident: () => readonly string[];
  /** Longest a request may run, whatever the caller's timeout. @default 120000 */
  maxRequestMs?: number;
  /**
   * Whether the engine can queue `items` more now (its maxQueuedItems bound). When it cannot, the
   * request is answered OVERLOADED at once instead of queueing into the caller's timeout.
   * @default always
   */
  hasCapacity?: (items: number) => boolean;
  /**
   * Items of requests this worker has taken and not answered (tokenizing, queued or running). A
   * request beyond it is answered OVERLOADED at once: the engine's queue only counts items once
   * they are tokenized, so a burst would otherwise all pass its check. A request alone is always
   * taken. @default 4096
   */
  maxInFlightItems?: number;
  logger?: Logger;
}

export class RpcServer implements Lifecycle {
  readonly #options: RpcServerOptions;
  readonly #routes: readonly RpcRoute[];
  readonly #serving: Subscription[] = [];
  readonly #resident = new Map<string, Subscription>();
  readonly #inFlight = new Set<Promise<void>>();
  readonly #stopping = new AbortController();
  #discovery: Subscription | null = null;
  /** Items of the requests being handled now. */
  #itemsInFlight = 0;
  #started = false;
  #draining = false;

  constructor(options: RpcServerOptions) {
    this.#options = options;
    // Every request in flight listens on the one stop signal: hundreds at once under load are
    // expected, not a leak (Node would warn past 10 as MaxListenersExceededWarning).
    setMaxListeners(0, this.#stopping.signal);
    const models = [...new Set(options.routes.map((route) => route.model))];
    this.#routes = [
      ...options.routes.map((route) => ({ operation: route.primitive, model: route.model })),
      ...models.map((model) => ({ operation: 'tokenize' as const, model })),
    ];
  }

  start(): void {
    if (this.#started) return;
    this.#started = true;
    const { nc, names } = this.#options;
    for (const route of this.#routes) {
      this.#serving.push(this.#subscribe(names.serving(route.operation, route.model), route));
    }
    this.#discovery = nc.subscribe(names.workers(), {
      callback: (error, msg) => {
        if (error === null) msg.respond(encodeJson(this.info()));
      },
    });
  }

  info(): WorkerInfo {
    const serves = [...new Set(this.#options.routes.map((r) => r.model))];
    const operations: Record<string, Primitive[]> = {};
    for (const route of this.#options.routes) (operations[route.model] ??= []).push(route.primitive);
    return { v: WIRE_VERSION, worker: this.#options.workerId, serves, resident: [...this.#options.resident()], operations };
  }

  /** Follows the pool: joins `resident` subjects of models just loaded, leaves those of models evicted. */
  setResident(models: Iterable<string>): void {
    if (!this.#started || this.#draining) return;
    const held = new Set(models);
    for (const route of this.#routes) {
      const subject = this.#options.names.resident(route.operation, route.model);
      const existing = this.#resident.get(subject);
      if (held.has(route.model) && existing === undefined) this.#resident.set(subject, this.#subscribe(subject, route));
      if (!held.has(route.model) && existing !== undefined) {
        this.#resident.delete(subject);
        // drain(): a request already delivered to this subscription is still answered.
        void existing.drain().catch(() => undefined);
      }
    }
  }

  #subscribe(subject: string, route: RpcRoute): Subscription {
    return this.#options.nc.subscribe(subject, {
      queue: this.#options.names.workerQueue,
      callback: (error, msg) => {
        if (error !== null) {
          this.#options.logger?.error({ subject, err: error.message }, 'request subscription failed');
          return;
        }
        // A request nobody waits for (published without a reply subject) would run for nothing:
        // any publisher could keep the models busy that way. Request-reply needs a reply subject.
        if (msg.reply === undefined || msg.reply === '') {
          this.#options.logger?.debug({ subject }, 'request without a reply subject ignored');
          return;
        }
        const work = this.#handle(msg, route);
        this.#inFlight.add(work);
        void work.finally(() => this.#inFlight.delete(work));
      },
    });
  }

  async #handle(msg: Msg, route: RpcRoute): Promise<void> {
    const received = performance.now();
    const worker = this.#options.workerId;
    let reply: RpcReply;
    // One controller and a timer cleared on completion: AbortSignal.timeout's timer would stay
    // pending for the whole cap (minutes) after each answered request, and AbortSignal.any costs
    // more than the rest of the request's bookkeeping.
    const abort = new AbortController();
    const onStop = (): void => abort.abort(this.#stopping.signal.reason);
    let timer: NodeJS.Timeout | undefined;
    let items = 0;
    let admitted = false;
    try {
      const decoded = decodeJson(msg.data);
      if (!decoded.ok) throw new ShoalError(ErrorCode.INVALID_INPUT, `the ${route.operation} request is not JSON: ${decoded.reason}`);
      items = requestItems(decoded.value);
      const limit = this.#options.maxInFlightItems ?? DEFAULT_MAX_IN_FLIGHT_ITEMS;
      const full = this.#itemsInFlight > 0 && this.#itemsInFlight + items > limit;
      if (full || (this.#options.hasCapacity !== undefined && !this.#options.hasCapacity(items))) {
        throw new ShoalError(ErrorCode.OVERLOADED, `worker ${worker} has ${this.#itemsInFlight} items in flight (limit ${limit}); retry shortly`, {
          details: { worker, items, inFlightItems: this.#itemsInFlight, retryAfterSeconds: 1 },
        });
      }
      this.#itemsInFlight += items;
      admitted = true;
      const capMs = this.#options.maxRequestMs ?? 120_000;
      const timeoutMs = callerTimeout(msg.headers, capMs) ?? capMs;
      timer = setTimeout(() => abort.abort(new DOMException(`the request ran past its ${timeoutMs} ms timeout`, 'TimeoutError')), timeoutMs);
      if (this.#stopping.signal.aborted) onStop();
      else this.#stopping.signal.addEventListener('abort', onStop, { once: true });
      const result = await runOperation(this.#options.engine, { ...route, request: decoded.value, priority: 'interactive', signal: abort.signal, maxResultBytes: this.#replyLimit() });
      reply = { ok: true, result, worker };
    } catch (error) {
      // The caller's own deadline (Shoal-Timeout-Ms) or the cap passed: a TIMEOUT, not a CANCELLED.
      const reason: unknown = abort.signal.reason;
      const timedOut = abort.signal.aborted && reason instanceof DOMException && reason.name === 'TimeoutError';
      reply = { ok: false, error: serializeError(timedOut ? new ShoalError(ErrorCode.TIMEOUT, reason.message, { cause: error }) : error), worker };
    } finally {
      clearTimeout(timer);
      this.#stopping.signal.removeEventListener('abort', onStop);
      if (admitted) this.#itemsInFlight -= items;
    }
    this.#respond(msg, reply, received);
  }

  #respond(msg: Msg, reply: RpcReply, received: number): void {
    if (msg.reply === undefined || msg.reply === '') return;
    const packed = msg.headers?.get(PACKED_HEADERS.accept) === PACKED_FORMAT ? packReply(reply) : null;
    let body = packed ?? encodeJson(reply);
    const limit = this.#replyLimit();
    if (body.byteLength > limit) {
      const error = new ShoalError(
        ErrorCode.INPUT_TOO_LARGE,
        `the result is ${body.byteLength} bytes, over the NATS message limit of ${limit}; ask for fewer items or outputs, or submit a job`,
      );
      body = encodeJson({ ok: false, error: serializeError(error), worker: reply.worker });
    }
    try {
      const h = packed !== null && body === packed ? packedHeaders() : natsHeaders();
      h.set(RPC_HEADERS.workerMs, (performance.now() - received).toFixed(3));
      msg.respond(body, { headers: h });
    } catch (error) {
      this.#options.logger?.warn({ err: String(error) }, 'could not send a reply');
    }
  }

  /** The largest reply the server takes (its max_payload). */
  #replyLimit(): number {
    return this.#options.nc.info?.max_payload ?? 1024 * 1024;
  }

  /** Stops taking requests and answers those already received. */
  drain(): Promise<void> {
    return this.#drain(false);
  }

  /** Stops taking requests and aborts those already received (their callers get CANCELLED). */
  close(): Promise<void> {
    return this.#drain(true);
  }

  async #drain(force: boolean): Promise<void> {
    this.#draining = true;
    const subscriptions = [...this.#serving, ...this.#resident.values()];
    this.#serving.length = 0;
    this.#resident.clear();
    if (this.#discovery !== null) subscriptions.push(this.#discovery);
    this.#discovery = null;
    await Promise.all(subscriptions.map((s) => s.drain().catch(() => undefined)));
    if (force) this.#stopping.abort();
    await Promise.all([...this.#inFlight]);
  }
}
