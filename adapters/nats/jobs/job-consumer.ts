import { setMaxListeners } from 'node:events';
import type { Consumer, JetStreamClient, JetStreamManager, JsMsg } from '@nats-io/jetstream';
import type { Logger } from '../../observability/logger.js';
import { JS_CODES, isJsApiCode } from '../connection/nats-errors.js';
import type { Route } from '../rpc/rpc-server.js';
import type { Lifecycle } from '../../protocol/lifecycle.js';

/**
 * The worker's pull loop over the durable consumers of the models it serves.
 * - Affinity: each round reads the consumers' pending counts and pulls first from models that are
 *   resident here; a model that is not is pulled only with slots left over, once its work has
 *   waited `affinityWaitMs` (time for a worker that holds it to take it), one part of one such
 *   model per round (that part loads it), so an idle worker neither loads every model at once nor
 *   holds parts while it loads. Models loading here are not pulled until they are ready.
 * - Bounded: at most `concurrency` parts in flight, and none while the engine's queue is full.
 * - Each fetch asks for no more than is pending, so it returns at once; its messages are handed
 *   off without awaiting their work (slow work inside a fetch loop misses heartbeats).
 * - In-flight parts get working() every third of the ack wait, so long batches and model loads
 *   are not redelivered under a worker that is still on them.
 * - Errors (a broker restart, a consumer deleted) are logged; the loop backs off, calls
 *   `recover` when a consumer or stream is gone, and goes on.
 */

/** Whether a worker holds a model: its pulls lean towards models it has ready. */
export type ModelState = 'ready' | 'loading' | 'absent';

export interface PulledRoute extends Route {
  /** Durable consumer name. */
  consumer: string;
}

export interface JobConsumerOptions {
  js: JetStreamClient;
  jsm: JetStreamManager;
  stream: string;
  routes: readonly PulledRoute[];
  /** Parts in flight at once. */
  concurrency: number;
  ackWaitMs: number;
  handle: (msg: JsMsg, signal: AbortSignal) => Promise<unknown>;
  modelState: (model: string) => ModelState;
  /** Whether the engine can take more work now (scheduler backpressure). @default always */
  hasCapacity?: () => boolean;
  /** @default 1000 */
  affinityWaitMs?: number;
  /** Longest wait between polls while idle; polls start at 10 ms and double. @default 250 */
  idlePollMs?: number;
  /** Re-creates the topology after a consumer or stream vanished (a broker that lost its store). */
  recover?: () => Promise<void>;
  logger?: Logger;
}

const FETCH_EXPIRES_MS = 1000;
const FIRST_IDLE_POLL_MS = 10;
const ERROR_BACKOFF_MS = [100, 250, 500, 1000, 2000, 5000] as const;

export class JobConsumer implements Lifecycle {
  readonly #options: JobConsumerOptions;
  readonly #consumers = new Map<string, Consumer>();
  /** When each non-resident route was first seen with pending work (for affinityWaitMs). */
  readonly #waitingSince = new Map<string, number>();
  readonly #inFlight = new Set<Promise<void>>();
  /** This worker's parts in flight per consumer. */
  readonly #perConsumer = new Map<string, number>();
  /** Models a part pulled while they were not resident is loading (until that part ends). */
  readonly #claimed = new Set<string>();
  readonly #shutdown = new AbortController();
  #loop: Promise<void> | null = null;
  #stopping = false;
  #wake: (() => void) | null = null;
  #rotation = 0;

  constructor(options: JobConsumerOptions) {
    this.#options = options;
    // Each part in flight listens on the shutdown signal (concurrency may exceed Node's warning threshold of 10).
    setMaxListeners(0, this.#shutdown.signal);
  }

  get inFlight(): number {
    return this.#inFlight.size;
  }

  start(): void {
    if (this.#loop === null) this.#loop = this.#run();
  }

  /** Resolves after `ms`, or sooner when a part finishes or drain starts. */
  #sleep(ms: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        this.#wake = null;
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.#wake = done;
    });
  }

  async #run(): Promise<void> {
    let idleMs = FIRST_IDLE_POLL_MS;
    let errors = 0;
    const maxIdle = this.#options.idlePollMs ?? 250;
    while (!this.#stopping) {
      const free = this.#options.concurrency - this.#inFlight.size;
      if (free <= 0 || !(this.#options.hasCapacity?.() ?? true)) {
        await this.#sleep(maxIdle);
        continue;
      }
      let pulled: number;
      try {
        pulled = await this.#round(free);
        errors = 0;
      } catch (error) {
        if (this.#stopping) break;
        const wait = ERROR_BACKOFF_MS[Math.min(errors, ERROR_BACKOFF_MS.length - 1)] ?? 5000;
        errors++;
        this.#options.logger?.warn({ err: String(error), retryInMs: wait }, 'pulling jobs failed');
        if (isJsApiCode(error, JS_CODES.ConsumerNotFound) || isJsApiCode(error, JS_CODES.StreamNotFound)) {
          this.#consumers.clear();
          await this.#options.recover?.().catch((e: unknown) => this.#options.logger?.error({ err: String(e) }, 'recreating the topology failed'));
        }
        await this.#sleep(wait);
        continue;
      }
      if (pulled > 0) idleMs = FIRST_IDLE_POLL_MS;
      else {
        await this.#sleep(idleMs);
        idleMs = Math.min(maxIdle, idleMs * 2);
      }
    }
  }

  async #consumer(route: PulledRoute): Promise<Consumer> {
    let consumer = this.#consumers.get(route.consumer);
    if (consumer === undefined) {
      consumer = await this.#options.js.consumers.get(this.#options.stream, route.consumer);
      this.#consumers.set(route.consumer, consumer);
    }
    return consumer;
  }

  /**
   * One pass over the routes; returns how many parts it started. Work waiting for redelivery (a
   * nak with delay, an ack wait that ran out under a stopped worker) is not in num_pending but in
   * num_ack_pending: when nothing else was pulled, a route whose ack-pending count exceeds this
   * worker's own parts in flight gets a one-part fetch, which the server answers with the
   * redelivery once it is due (or after FETCH_EXPIRES_MS with nothing).
   */
  async #round(slots: number): Promise<number> {
    const { routes, jsm, stream, modelState } = this.#options;
    const infos = await Promise.all(routes.map((route) => jsm.consumers.info(stream, route.consumer)));
    const now = Date.now();
    const resident: { route: PulledRoute; pending: number }[] = [];
    const others: { route: PulledRoute; pending: number; since: number }[] = [];
    const redeliveries: PulledRoute[] = [];
    routes.forEach((route, i) => {
      const pending = infos[i]?.num_pending ?? 0;
      const elsewhere = (infos[i]?.num_ack_pending ?? 0) - (this.#perConsumer.get(route.consumer) ?? 0);
      // A model this worker is already loading through a part it pulled counts as loading.
      const state = this.#claimed.has(route.model) ? 'loading' : modelState(route.model);
      if (pending === 0 || state === 'ready') this.#waitingSince.delete(route.consumer);
      if (state !== 'loading' && pending === 0 && elsewhere > 0) redeliveries.push(route);
      if (pending === 0) return;
      if (state === 'ready') resident.push({ route, pending });
      else if (state === 'absent') {
        const since = this.#waitingSince.get(route.consumer) ?? now;
        this.#waitingSince.set(route.consumer, since);
        others.push({ route, pending, since });
      }
    });
    // Rotate the starting point so models with steady work share the slots.
    const start = this.#rotation++ % Math.max(1, resident.length);
    const ordered = [...resident.slice(start), ...resident.slice(0, start)];
    let free = slots;
    let started = 0;
    for (const { route, pending } of ordered) {
      if (free <= 0 || this.#stopping) break;
      const got = await this.#pull(route, Math.min(free, pending));
      free -= got;
      started += got;
    }
    const affinityWait = this.#options.affinityWaitMs ?? 1000;
    const loading = routes.some((route) => this.#claimed.has(route.model) || modelState(route.model) === 'loading');
    const stranger = others.sort((a, b) => a.since - b.since).find((o) => now - o.since >= affinityWait);
    if (free > 0 && !loading && stranger !== undefined && !this.#stopping) {
      // One part: it loads the model; the rest follow once the model is resident (or go to a
      // worker that has it), instead of waiting here on the load.
      const got = await this.#pull(stranger.route, 1, true);
      free -= got;
      started += got;
    }
    if (started === 0 && free > 0 && !this.#stopping) {
      const route = redeliveries[this.#rotation % Math.max(1, redeliveries.length)];
      if (route !== undefined) started += await this.#pull(route, 1, modelState(route.model) !== 'ready');
    }
    return started;
  }

  async #pull(route: PulledRoute, count: number, claim = false): Promise<number> {
    const consumer = await this.#consumer(route);
    const messages = await consumer.fetch({ max_messages: count, expires: FETCH_EXPIRES_MS });
    let got = 0;
    for await (const msg of messages) {
      this.#dispatch(msg, route, claim);
      got++;
    }
    return got;
  }

  #dispatch(msg: JsMsg, route: PulledRoute, claim: boolean): void {
    const interval = Math.max(200, Math.floor(this.#options.ackWaitMs / 3));
    const keepAlive = setInterval(() => msg.working(), interval);
    if (claim) this.#claimed.add(route.model);
    this.#perConsumer.set(route.consumer, (this.#perConsumer.get(route.consumer) ?? 0) + 1);
    const work = this.#options
      .handle(msg, this.#shutdown.signal)
      .then(
        () => undefined,
        (error: unknown) => {
          // The handler settles every failure it can; what reaches here (NATS down while acking)
          // leaves the message to be redelivered after the ack wait.
          this.#options.logger?.error({ err: String(error), subject: msg.subject, seq: msg.seq }, 'handling a job part failed');
        },
      )
      .finally(() => {
        clearInterval(keepAlive);
        if (claim) this.#claimed.delete(route.model);
        this.#perConsumer.set(route.consumer, (this.#perConsumer.get(route.consumer) ?? 1) - 1);
        this.#inFlight.delete(work);
        this.#wake?.();
      });
    this.#inFlight.add(work);
  }

  /** Stops pulling and waits for the parts in flight. Safe to call twice; close() may follow. */
  drain(): Promise<void> {
    return this.#drain(false);
  }

  /** Stops pulling and aborts the parts in flight (the handler hands them back to the queue for another worker). */
  close(): Promise<void> {
    return this.#drain(true);
  }

  async #drain(force: boolean): Promise<void> {
    this.#stopping = true;
    this.#wake?.();
    if (force) this.#shutdown.abort();
    await this.#loop;
    while (this.#inFlight.size > 0) await Promise.all([...this.#inFlight]);
  }
}
