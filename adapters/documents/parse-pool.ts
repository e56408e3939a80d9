import { availableParallelism } from 'node:os';
import type { Transferable } from 'node:worker_threads';
import { ErrorCode, ShoalError } from '../protocol/errors.js';
import { siblingModule, spawnThread } from '../support/spawn-thread.js';
import { ThreadClient } from '../support/thread-rpc.js';
import type { ParseRequest, ParseResponse } from './parse-messages.js';

/**
 * Main-thread handle on the parse threads. A document holds one thread for its whole life (its
 * open PDF lives there), and a thread holds one document at a time: pdfjs's in-thread worker
 * clears caches shared by every document of the thread when one is destroyed, which leaves the
 * other documents open in that thread unable to render. Documents beyond the thread count wait
 * their turn, first come first served. A thread that crashes (out of memory on a hostile file, a
 * native fault) fails only the document it held; the next document gets a fresh thread.
 */

export interface ParsePoolOptions {
  /** @default min(2, available cores) */
  threads?: number;
  /** Heap limit per thread, MiB. @default 1024 */
  memoryMb?: number;
}

interface Slot {
  client: ThreadClient<ParseRequest, ParseResponse>;
  busy: boolean;
  /** Settles when the thread has started and answered a first (empty) request. */
  ready: Promise<void>;
}

/** A document's session on its thread. */
export interface ThreadLease {
  readonly key: number;
  request(body: ParseRequest, transfer?: readonly Transferable[]): Promise<ParseResponse>;
  /** Settles once the thread is up (so time limits on steps need not include its start-up). */
  ready(): Promise<void>;
  /** Stops the thread (a request that hangs); the slot gets a fresh thread for the next document. */
  terminate(): Promise<void>;
  release(): void;
}

interface Waiter {
  resolve: (lease: ThreadLease) => void;
  reject: (error: Error) => void;
}

export class ParsePool {
  readonly #size: number;
  readonly #memoryMb: number;
  readonly #slots: (Slot | undefined)[];
  readonly #waiters: Waiter[] = [];
  #nextKey = 1;
  #closed = false;

  constructor(options: ParsePoolOptions = {}) {
    this.#size = Math.max(1, options.threads ?? Math.min(2, availableParallelism()));
    this.#memoryMb = options.memoryMb ?? 1024;
    this.#slots = Array.from({ length: this.#size }, () => undefined);
  }

  get threads(): number {
    return this.#size;
  }

  #spawn(index: number): Slot {
    const worker = spawnThread(siblingModule(import.meta.url, 'parse-thread'), {
      name: `shoal-parse-${index}`,
      resourceLimits: { maxOldGenerationSizeMb: this.#memoryMb },
    });
    const client = new ThreadClient<ParseRequest, ParseResponse>(worker, { name: `parse thread ${index}` });
    // Closing a document that was never opened is a no-op: it only proves the thread is listening.
    const ready = client.request({ type: 'close', key: 0 }).then(() => undefined);
    ready.catch(() => undefined);
    const slot: Slot = { client, busy: false, ready };
    this.#slots[index] = slot;
    return slot;
  }

  /** A free slot's lease (starting its thread if it has none, or a fresh one if it crashed), or null. */
  #tryLease(): ThreadLease | null {
    const index = this.#slots.findIndex((slot) => slot === undefined || !slot.busy);
    if (index < 0) return null;
    const current = this.#slots[index];
    const slot = current !== undefined && current.client.alive ? current : this.#spawn(index);
    slot.busy = true;
    let released = false;
    return {
      key: this.#nextKey++,
      request: (body, transfer = []) => slot.client.request(body, transfer),
      ready: () => slot.ready,
      terminate: () => slot.client.close(),
      release: () => {
        if (released) return;
        released = true;
        slot.busy = false;
        this.#handOver();
      },
    };
  }

  #handOver(): void {
    while (this.#waiters.length > 0 && !this.#closed) {
      const lease = this.#tryLease();
      if (lease === null) return;
      this.#waiters.shift()?.resolve(lease);
    }
  }

  /**
   * A free thread right now, or null: for helping with a long document's pages. Documents waiting
   * for a thread come first (a whole document per thread is the cheaper parallelism).
   */
  tryAcquire(): ThreadLease | null {
    if (this.#closed || this.#waiters.length > 0) return null;
    return this.#tryLease();
  }

  /** Pins a new document to a free thread, waiting for one when all are busy. */
  acquire(): Promise<ThreadLease> {
    if (this.#closed) return Promise.reject(new ShoalError(ErrorCode.UNAVAILABLE, 'the document parser is closed'));
    const lease = this.#waiters.length === 0 ? this.#tryLease() : null;
    if (lease !== null) return Promise.resolve(lease);
    return new Promise((resolve, reject) => this.#waiters.push({ resolve, reject }));
  }

  /** Stops every thread; documents being read fail with UNAVAILABLE. Idempotent. */
  async close(): Promise<void> {
    this.#closed = true;
    const closed = new ShoalError(ErrorCode.UNAVAILABLE, 'the document parser is closed');
    for (const waiter of this.#waiters.splice(0, this.#waiters.length)) waiter.reject(closed);
    const slots = this.#slots.splice(0, this.#slots.length);
    await Promise.all(slots.map((slot) => slot?.client.close()));
  }
}
