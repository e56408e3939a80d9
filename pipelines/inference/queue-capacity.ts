import { ErrorCode, ShoalError } from '../../adapters/protocol/errors.js';
import type { Priority } from '../../adapters/protocol/requests.js';

/**
 * The scheduler's bound on waiting items (backpressure): it counts the items queued over all
 * models, per lane too (`shoal_queue_items{lane}`), and holds bulk submitters until their items
 * fit under `maxQueuedItems`. Apart from scheduler.ts because admission is a concern of its own:
 * the scheduler only reports items in and out and wakes the waiters after they leave.
 */

interface CapacityWaiter {
  items: number;
  resolve: () => void;
}

export class QueueCapacity {
  readonly #maxQueuedItems: number;
  #queued = 0;
  readonly #byLane: Record<Priority, number> = { interactive: 0, bulk: 0 };
  #waiters: CapacityWaiter[] = [];

  constructor(maxQueuedItems: number) {
    this.#maxQueuedItems = maxQueuedItems;
  }

  /** Items waiting over all models. */
  get queued(): number {
    return this.#queued;
  }

  /** Items waiting per lane. */
  get byLane(): Readonly<Record<Priority, number>> {
    return { ...this.#byLane };
  }

  /** An item of `lane` joined a queue. */
  added(lane: Priority): void {
    this.#queued++;
    this.#byLane[lane]++;
  }

  /** An item of `lane` left its queue (taken into a batch or dropped); call wake() once done. */
  removed(lane: Priority): void {
    this.#queued--;
    this.#byLane[lane]--;
  }

  /** Whether `items` more items fit now; an empty queue takes any number. */
  hasRoom(items: number): boolean {
    return this.#queued === 0 || this.#queued + items <= this.#maxQueuedItems;
  }

  /** Resolves when `items` more items fit; rejects with CANCELLED when `signal` aborts first. */
  waitForRoom(items: number, signal?: AbortSignal): Promise<void> {
    if (this.hasRoom(items)) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const onAbort = (): void => {
        this.#waiters = this.#waiters.filter((w) => w !== waiter);
        reject(new ShoalError(ErrorCode.CANCELLED, 'the request was cancelled'));
      };
      const waiter: CapacityWaiter = {
        items,
        resolve: () => {
          signal?.removeEventListener('abort', onAbort);
          resolve();
        },
      };
      this.#waiters.push(waiter);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  /** Lets every waiter whose items now fit go on. */
  wake(): void {
    const waiting = this.#waiters;
    this.#waiters = [];
    for (const waiter of waiting) {
      if (this.hasRoom(waiter.items)) waiter.resolve();
      else this.#waiters.push(waiter);
    }
  }
}
