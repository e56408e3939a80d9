import { parentPort, type Transferable, type Worker } from 'node:worker_threads';
import {
  ErrorCode,
  ShoalError,
  deserializeError,
  serializeError,
  type SerializedError,
} from '../protocol/errors.js';

/**
 * A typed request/response channel to a worker thread: each request gets an id, answers are
 * matched by id, buffers can be transferred, and every pending request is rejected if the thread
 * dies, so no caller waits forever.
 */

interface RequestEnvelope<Req> {
  id: number;
  body: Req;
}

type ResponseEnvelope<Res> =
  | { id: number; ok: true; body: Res }
  | { id: number; ok: false; error: SerializedError };

interface Pending<Res> {
  resolve: (value: Res) => void;
  reject: (error: Error) => void;
}

export interface ThreadClientOptions {
  /** Used in error messages ("model thread for X exited"). */
  name: string;
}

export class ThreadClient<Req, Res> {
  readonly #worker: Worker;
  #name: string;
  readonly #pending = new Map<number, Pending<Res>>();
  #nextId = 1;
  #dead: ShoalError | null = null;
  #exited: Promise<void>;

  constructor(worker: Worker, options: ThreadClientOptions) {
    this.#worker = worker;
    this.#name = options.name;
    // An idle thread must not keep the process alive; a thread with work pending must.
    worker.unref();
    worker.on('message', (message: ResponseEnvelope<Res>) => this.#onMessage(message));
    worker.on('error', (error: Error) => {
      this.#fail(new ShoalError(ErrorCode.INTERNAL, `${this.#name} crashed: ${error.message}`, { cause: error }));
    });
    this.#exited = new Promise((resolve) => {
      worker.once('exit', (code) => {
        this.#fail(new ShoalError(ErrorCode.UNAVAILABLE, `${this.#name} exited (code ${code})`));
        resolve();
      });
    });
  }

  /** Renames the thread in error messages (a spare thread gets its model's name when it is used). */
  rename(name: string): void {
    this.#name = name;
  }

  get alive(): boolean {
    return this.#dead === null;
  }

  get pendingCount(): number {
    return this.#pending.size;
  }

  request(body: Req, transfer: readonly Transferable[] = []): Promise<Res> {
    if (this.#dead !== null) return Promise.reject(this.#dead);
    const id = this.#nextId++;
    return new Promise<Res>((resolve, reject) => {
      if (this.#pending.size === 0) this.#worker.ref();
      this.#pending.set(id, { resolve, reject });
      const envelope: RequestEnvelope<Req> = { id, body };
      try {
        this.#worker.postMessage(envelope, [...transfer]);
      } catch (error) {
        this.#settled(id);
        reject(new ShoalError(ErrorCode.INTERNAL, `cannot send to ${this.#name}: ${String(error)}`, { cause: error }));
      }
    });
  }

  /** Stops the thread; pending requests are rejected with UNAVAILABLE. Idempotent. */
  async close(): Promise<void> {
    if (this.#dead === null) this.#fail(new ShoalError(ErrorCode.UNAVAILABLE, `${this.#name} was closed`));
    await this.#worker.terminate();
    await this.#exited;
  }

  #onMessage(message: ResponseEnvelope<Res>): void {
    const pending = this.#pending.get(message.id);
    if (pending === undefined) return;
    this.#settled(message.id);
    if (message.ok) pending.resolve(message.body);
    else pending.reject(deserializeError(message.error));
  }

  #settled(id: number): void {
    this.#pending.delete(id);
    if (this.#pending.size === 0) this.#worker.unref();
  }

  #fail(error: ShoalError): void {
    if (this.#dead === null) this.#dead = error;
    for (const pending of this.#pending.values()) pending.reject(error);
    this.#pending.clear();
    this.#worker.unref();
  }
}

/** What a thread handler returns: the answer and the buffers to move instead of copy. */
export interface HandlerResult<Res> {
  body: Res;
  transfer?: Transferable[];
}

/**
 * Thread side: answers each request with `handler`. Requests are handled one at a time, in order,
 * because inference in a thread is synchronous anyway and ordering keeps load/run/unload simple.
 */
export function serveThread<Req, Res>(handler: (body: Req) => Promise<HandlerResult<Res>> | HandlerResult<Res>): void {
  const port = parentPort;
  if (port === null) throw new ShoalError(ErrorCode.INTERNAL, 'serveThread must run inside a worker thread');
  let queue: Promise<void> = Promise.resolve();
  port.on('message', (envelope: RequestEnvelope<Req>) => {
    queue = queue.then(async () => {
      let response: ResponseEnvelope<Res>;
      let transfer: Transferable[] = [];
      try {
        const result = await handler(envelope.body);
        response = { id: envelope.id, ok: true, body: result.body };
        transfer = result.transfer ?? [];
      } catch (error) {
        response = { id: envelope.id, ok: false, error: serializeError(error) };
      }
      port.postMessage(response, transfer);
    });
  });
}
