import { setMaxListeners } from 'node:events';
import { ErrorCode, isShoalError, ShoalError } from '../../adapters/protocol/errors.js';
import { imageItemError } from '../../adapters/protocol/item-errors.js';
import type { Priority } from '../../adapters/protocol/requests.js';
import type { ItemOutput, Prepared, PrepareRequest, PrepItem, RunOptions, Task } from '../../adapters/models/family.js';
import type { PrepPool } from '../../adapters/model-threads/prep-pool.js';
import type { CompareTo } from '../../adapters/model-threads/thread-messages.js';
import type { ModelLease } from './loaded-model.js';
import type { ModelPool } from './pool.js';
import type { Scheduler } from './scheduler.js';

/**
 * One request's items through tokenization and inference: prepared (tokenized) in a prep thread
 * chunk by chunk, each chunk handed to the scheduler as soon as it is ready, so tokenization
 * overlaps with inference; bulk chunks wait for queue room (backpressure). Outputs come back in
 * input order.
 */

/** Items per prep message: the first batches start after this many items are tokenized. */
const PREP_CHUNK = 128;
/**
 * A request's first prep message is smaller: the model waits for it (just loaded, or idle), and
 * tokenizing 128 texts took 130-160 ms in which a freshly loaded model sat idle at the start of
 * every `shoal encode` (model-thread CPU profile); 32 give the first batch in a quarter of that.
 */
const FIRST_PREP_CHUNK = 32;

export function throwIfAborted(signal: AbortSignal | undefined): void {
  if (signal?.aborted === true) throw new ShoalError(ErrorCode.CANCELLED, 'the request was cancelled');
}

/** What one run of a request's items needs besides the items. */
export interface Execution {
  lane: Priority;
  task: Task;
  maxLength: number;
  options: RunOptions;
  labels?: string[] | undefined;
  compareTo?: CompareTo | undefined;
  signal?: AbortSignal | undefined;
}

export interface ChunkedRun {
  outputs: ItemOutput[];
  prepared: Prepared[];
}

export class ChunkedRunner {
  readonly #prep: PrepPool;
  readonly #scheduler: Scheduler;
  readonly #pool: ModelPool;
  readonly #interactiveSessions: boolean;

  constructor(parts: { prep: PrepPool; scheduler: Scheduler; pool: ModelPool; interactiveSessions: boolean }) {
    this.#prep = parts.prep;
    this.#scheduler = parts.scheduler;
    this.#pool = parts.pool;
    this.#interactiveSessions = parts.interactiveSessions;
  }

  async run(lease: ModelLease, items: PrepItem[], run: Execution): Promise<ChunkedRun> {
    const model = lease.model;
    if (run.lane === 'interactive' && this.#interactiveSessions && model.interactive === null) {
      // The first interactive request does not wait for the extra session; later ones use it.
      void this.#pool.ensureInteractive(lease).catch(() => false);
    }
    // One internal signal per request carries the caller's abort to every chunk; chunks add their
    // listeners to it, not to a signal the caller may share across many requests.
    const internal = new AbortController();
    setMaxListeners(0, internal.signal);
    const forward = (): void => internal.abort();
    if (run.signal?.aborted === true) internal.abort();
    run.signal?.addEventListener('abort', forward, { once: true });
    try {
      return await this.#submitChunks(model, items, run, internal.signal);
    } finally {
      run.signal?.removeEventListener('abort', forward);
    }
  }

  async #submitChunks(model: ModelLease['model'], items: PrepItem[], run: Execution, signal: AbortSignal): Promise<ChunkedRun> {
    const prepared: Prepared[] = [];
    const parts: Promise<ItemOutput[]>[] = [];
    const done = this.#scheduler.preparing(model, run.lane);
    try {
      for (let start = 0; start < items.length; ) {
        throwIfAborted(signal);
        const chunk = items.slice(start, start + (start === 0 ? FIRST_PREP_CHUNK : PREP_CHUNK));
        const offset = start;
        start += chunk.length;
        const request: PrepareRequest = { task: run.task, items: chunk, maxLength: run.maxLength };
        if (run.labels !== undefined) request.labels = run.labels;
        const ready = await this.#prep.prepare(model.profile, request, run.lane).catch((error: unknown) => {
          throw itemOfRequest(error, offset);
        });
        prepared.push(...ready);
        if (run.lane === 'bulk') await this.#scheduler.waitForCapacity(ready.length, signal);
        const part = this.#scheduler.submit({
          model,
          lane: run.lane,
          items: ready,
          options: run.options,
          compareTo: run.compareTo,
          signal,
        });
        // Attached now so a failing chunk is never an unhandled rejection while later chunks prepare.
        part.catch(() => undefined);
        parts.push(part);
      }
    } finally {
      done();
    }
    const settled = await Promise.allSettled(parts);
    const outputs: ItemOutput[] = [];
    for (const result of settled) {
      if (result.status === 'rejected') throw result.reason;
      outputs.push(...result.value);
    }
    return { outputs, prepared };
  }
}

/**
 * A prep failure that names its item (`details.item`, "image item 2: …") counts that item within
 * the prep chunk; the caller sent the whole request, so the item is renumbered from the request's
 * start (the 301st image of a request failed as "image item 12" of its chunk).
 */
function itemOfRequest(error: unknown, offset: number): unknown {
  if (offset === 0 || !isShoalError(error)) return error;
  const item = error.details?.item;
  return typeof item === 'number' ? imageItemError(error, item + offset) : error;
}
