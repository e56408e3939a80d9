import { ErrorCode, ShoalError, toShoalError } from '../../adapters/protocol/errors.js';
import type { Priority } from '../../adapters/protocol/requests.js';
import { preparedCost, type ItemOutput } from '../../adapters/models/family.js';
import type { ModelWorker } from '../../adapters/model-threads/model-worker.js';
import { adaptedBudget, initialBudget } from './batch-budget.js';
import { bulkFillWaitMs, minServed, nextBulkModel, primaryFreeForQueries, type ModelState } from './batch-order.js';
import type { LoadedModel } from './loaded-model.js';
import { QueueCapacity } from './queue-capacity.js';
import { newRequest, optionsKey, type RequestState, type Submission, type WorkItem } from './scheduled-request.js';
import { DEFAULT_SCHEDULER_OPTIONS, type BatchEvent, type SchedulerOptions } from './scheduler-options.js';
import { ModelWorkQueue, type CutBatch, type CutOptions, type Queued } from './work-queue.js';

/**
 * Forms batches across requests and runs them on the models' threads.
 * - Cost = padded tokens; batches are cut from items of similar length (work-queue.ts).
 * - Two lanes: `interactive` items go into the very next batch of their model, on the model's
 *   interactive session when it has one (so they never wait for bulk work), else ahead of all bulk
 *   work; `bulk` shares the batch slots fairly between models (least served tokens first).
 * - A bulk batch that is not full waits up to `maxWaitMs` while more items of that model are still
 *   being prepared, and goes at once when none are.
 * - Cancelled or expired items are dropped before they reach a batch; a failing batch that mixed
 *   requests is split so one bad request cannot fail the others.
 * - The queue is bounded: bulk submitters wait for room (backpressure); see waitForCapacity.
 * This file runs batches; the rules it follows live beside it: batch-order.ts (which model goes
 * next), queue-capacity.ts (the bound), batch-budget.ts (token budgets), scheduled-request.ts.
 */

export class Scheduler {
  readonly #options: SchedulerOptions;
  readonly #models = new Map<string, ModelState<WorkItem>>();
  /** Requests not yet settled. */
  readonly #requests = new Set<RequestState>();
  #running = 0;
  /** Items waiting, over all models and per lane, and the submitters waiting for room. */
  readonly #capacity: QueueCapacity;
  #nextId = 1;
  #idleWaiters: (() => void)[] = [];
  #closed = false;

  constructor(options: Partial<SchedulerOptions> = {}) {
    this.#options = { ...DEFAULT_SCHEDULER_OPTIONS, ...options };
    this.#capacity = new QueueCapacity(this.#options.maxQueuedItems);
  }

  get queuedItems(): number {
    return this.#capacity.queued;
  }

  /** Items waiting per lane. */
  get queuedByLane(): Readonly<Record<Priority, number>> {
    return this.#capacity.byLane;
  }

  get runningBatches(): number {
    return this.#running;
  }

  /** Whether `items` more bulk items fit in the queue now (callers that cannot wait answer OVERLOADED). */
  hasCapacity(items: number): boolean {
    return this.#capacity.hasRoom(items);
  }

  /** Resolves when `items` more bulk items fit in the queue. */
  waitForCapacity(items: number, signal?: AbortSignal): Promise<void> {
    return this.#capacity.waitForRoom(items, signal);
  }

  /**
   * Declares that bulk items of `model` are being prepared: its bulk batches may wait briefly for
   * them, and its primary session is kept for them instead of serving queries. Interactive
   * preparations are not counted (no bulk item comes of them).
   */
  preparing(model: LoadedModel, lane: Priority = 'bulk'): () => void {
    if (lane === 'interactive') return () => undefined;
    const state = this.#state(model);
    state.preparing++;
    let done = false;
    return () => {
      if (done) return;
      done = true;
      state.preparing--;
      this.#pump();
    };
  }

  submit(submission: Submission): Promise<ItemOutput[]> {
    if (this.#closed) return Promise.reject(new ShoalError(ErrorCode.UNAVAILABLE, 'the scheduler is closed'));
    if (submission.items.length === 0) return Promise.resolve([]);
    return new Promise<ItemOutput[]>((resolve, reject) => {
      const id = this.#nextId++;
      const request = newRequest(id, submission, resolve, reject);
      const signal = submission.signal;
      if (signal?.aborted === true) {
        reject(new ShoalError(ErrorCode.CANCELLED, 'the request was cancelled'));
        return;
      }
      this.#requests.add(request);
      if (signal !== undefined) {
        const onAbort = (): void => this.#fail(request, new ShoalError(ErrorCode.CANCELLED, 'the request was cancelled'));
        signal.addEventListener('abort', onAbort, { once: true });
        request.detach = () => signal.removeEventListener('abort', onAbort);
      }
      this.#enqueue(request, submission.items.map((prepared, index) => ({ request, index, prepared })), optionsKey(submission, id));
      this.#pump();
    });
  }

  /** Resolves when nothing is queued or running. */
  idle(): Promise<void> {
    if (this.#capacity.queued === 0 && this.#running === 0 && !this.#interactiveRunning()) return Promise.resolve();
    return new Promise((resolve) => this.#idleWaiters.push(resolve));
  }

  /** Fails everything still queued and refuses new work. Running batches finish. */
  close(): void {
    this.#closed = true;
    for (const state of this.#models.values()) {
      if (state.timer !== null) clearTimeout(state.timer);
    }
    const error = new ShoalError(ErrorCode.UNAVAILABLE, 'the scheduler was closed');
    for (const request of [...this.#requests]) {
      // Requests with a batch running finish with it; the rest fail now.
      if (request.queued.size > 0) this.#fail(request, error);
    }
  }

  /** Forgets a model's queue state (after eviction); its queue must be empty. */
  forget(name: string): void {
    const state = this.#models.get(name);
    if (state !== undefined && state.queue.bulkSize === 0 && state.queue.interactiveSize === 0 && state.primaryInFlight === 0) {
      if (state.timer !== null) clearTimeout(state.timer);
      this.#models.delete(name);
    }
  }

  #state(model: LoadedModel): ModelState<WorkItem> {
    let state = this.#models.get(model.name);
    if (state === undefined || state.model.worker !== model.worker) {
      // First use, or the model was evicted and reloaded: the queue starts fresh but keeps fairness.
      const served = state?.served ?? minServed(this.#models.values());
      state = {
        name: model.name,
        model,
        queue: state?.queue ?? new ModelWorkQueue<WorkItem>(),
        primaryInFlight: 0,
        lastInteractiveAt: state?.lastInteractiveAt ?? 0,
        interactiveBusy: false,
        served,
        preparing: state?.preparing ?? 0,
        budget: initialBudget(model, this.#options.maxBatchTokens),
        timer: null,
      };
      this.#models.set(model.name, state);
    }
    return state;
  }

  #enqueue(request: RequestState, items: WorkItem[], key: string): void {
    const state = this.#state(request.submission.model);
    const now = Date.now();
    if (state.queue.bulkSize === 0 && request.submission.lane === 'bulk') {
      // A model that was idle joins the fair share at the current level instead of hoarding credit.
      state.served = Math.max(state.served, minServed(this.#models.values()));
    }
    for (const payload of items) {
      const queued: Queued<WorkItem> = { payload, cost: preparedCost(payload.prepared), key, enqueuedAt: now, gone: false };
      request.queued.add(queued);
      if (request.submission.lane === 'interactive') {
        state.queue.addInteractive(queued);
        state.lastInteractiveAt = now;
      }
      else state.queue.addBulk(queued);
      this.#capacity.added(request.submission.lane);
    }
  }

  #cutOptions(state: ModelState<WorkItem>): CutOptions {
    return {
      maxBatchTokens: state.budget,
      maxBatchItems: this.#options.maxBatchItems,
      maxPadRatio: this.#options.maxPadRatio,
      padSlackTokens: this.#options.padSlackTokens,
      maxItemWaitMs: this.#options.maxItemWaitMs,
    };
  }

  #interactiveRunning(): boolean {
    for (const state of this.#models.values()) if (state.interactiveBusy) return true;
    return false;
  }

  /** Starts every batch that can start now. */
  #pump(): void {
    if (this.#closed) return;
    // Interactive first: on a dedicated session when there is one, else in the next primary slot.
    for (const state of this.#models.values()) {
      if (state.queue.interactiveSize === 0) continue;
      const dedicated = state.model.interactive;
      if (dedicated !== null && !state.interactiveBusy) {
        const batch = state.queue.cutInteractive(this.#cutOptions(state));
        if (batch !== null) this.#start(state, batch, 'interactive', dedicated);
      }
      // Queries left over (the interactive session is busy, or there is none) take the primary session when no bulk work needs it.
      if (state.queue.interactiveSize > 0 && primaryFreeForQueries(state, this.#models.values(), this.#options)) {
        const batch = state.queue.cutInteractive(this.#cutOptions(state));
        if (batch !== null) this.#start(state, batch, 'interactive', state.model.worker);
      }
    }
    for (;;) {
      const now = Date.now();
      const state = nextBulkModel(this.#models, now, this.#options, (candidate) => this.#bulkReady(candidate, now));
      if (state === null) break;
      const batch = state.queue.cutBulk(this.#cutOptions(state), Date.now());
      if (batch === null) break;
      this.#start(state, batch, 'bulk', state.model.worker);
    }
  }

  /** Whether a bulk batch of this model should go now; if not, pumps again once it has waited enough. */
  #bulkReady(state: ModelState<WorkItem>, now: number): boolean {
    const wait = bulkFillWaitMs(state, now, this.#options);
    if (wait === 0) return true;
    if (state.timer === null) {
      state.timer = setTimeout(() => {
        state.timer = null;
        this.#pump();
      }, wait);
      state.timer.unref();
    }
    return false;
  }

  #start(state: ModelState<WorkItem>, cut: CutBatch<WorkItem>, lane: Priority, worker: ModelWorker): void {
    const now = Date.now();
    const items: WorkItem[] = [];
    let queueMs = 0;
    for (const queued of cut.items) {
      const request = queued.payload.request;
      this.#capacity.removed(request.submission.lane);
      request.queued.delete(queued);
      if (request.settled) continue;
      const deadline = request.submission.deadline;
      if (deadline !== undefined && now > deadline) {
        this.#fail(request, new ShoalError(ErrorCode.TIMEOUT, 'the request expired before it reached a batch'));
        continue;
      }
      queueMs = Math.max(queueMs, now - queued.enqueuedAt);
      items.push(queued.payload);
    }
    this.#capacity.wake();
    if (items.length === 0) {
      queueMicrotask(() => this.#pump());
      return;
    }
    const first = items[0];
    if (first === undefined) return;
    const { options, compareTo } = first.request.submission;
    const usesPrimary = worker === state.model.worker;
    this.#running++;
    if (usesPrimary) {
      state.primaryInFlight++;
    } else {
      state.interactiveBusy = true;
    }
    if (lane === 'bulk') state.served += cut.paddedTokens;
    const realTokens = items.reduce((sum, item) => sum + preparedCost(item.prepared), 0);
    const padded = Math.max(...items.map((item) => preparedCost(item.prepared))) * items.length;
    const started = performance.now();
    let failure: ShoalError | undefined;
    worker
      .run(items.map((item) => item.prepared), options, compareTo)
      .then(
        (result) => this.#complete(items, result.outputs),
        (error: unknown) => {
          failure = toShoalError(error, ErrorCode.INFERENCE_FAILED);
          this.#batchFailed(items, failure);
        },
      )
      .finally(() => {
        const runMs = performance.now() - started;
        this.#running--;
        if (usesPrimary) {
          state.primaryInFlight--;
        } else {
          state.interactiveBusy = false;
        }
        if (lane === 'bulk') this.#adapt(state, padded, runMs);
        const event: BatchEvent = { model: state.name, lane, session: usesPrimary ? 'primary' : 'interactive', items: items.length, realTokens, paddedTokens: padded, runMs, queueMs };
        if (failure !== undefined) event.error = failure;
        this.#options.hooks?.onBatch?.(event);
        this.#pump();
        this.#wakeIdle();
      });
  }

  #complete(items: WorkItem[], outputs: ItemOutput[]): void {
    items.forEach((item, k) => {
      const request = item.request;
      if (request.settled) return;
      const output = outputs[k];
      if (output === undefined) {
        this.#fail(request, new ShoalError(ErrorCode.INTERNAL, 'the model returned fewer outputs than items'));
        return;
      }
      request.outputs[item.index] = output;
      request.remaining--;
      if (request.remaining === 0) {
        request.settled = true;
        this.#requests.delete(request);
        request.detach();
        request.resolve(request.outputs);
      }
    });
  }

  #batchFailed(items: WorkItem[], error: ShoalError): void {
    const requests = new Set(items.map((item) => item.request));
    if (requests.size === 1 || error.code === ErrorCode.UNAVAILABLE) {
      for (const request of requests) this.#fail(request, error);
      return;
    }
    // Several requests shared the batch: rerun each alone, so only the culprit fails.
    for (const request of requests) {
      if (request.settled) continue;
      if (request.isolated) {
        this.#fail(request, error);
        continue;
      }
      request.isolated = true;
      const own = items.filter((item) => item.request === request);
      this.#enqueue(request, own, `${optionsKey(request.submission, request.id)}#isolated${request.id}`);
    }
  }

  #fail(request: RequestState, error: ShoalError): void {
    if (request.settled) return;
    request.settled = true;
    this.#requests.delete(request);
    const state = this.#models.get(request.submission.model.name);
    for (const queued of request.queued) {
      if (!queued.gone) {
        state?.queue.drop(queued);
        this.#capacity.removed(request.submission.lane);
      }
    }
    request.queued.clear();
    request.detach();
    request.reject(error);
    this.#capacity.wake();
    this.#wakeIdle();
  }

  /** Moves a model's token budget toward the target batch time (batch-budget.ts). */
  #adapt(state: ModelState<WorkItem>, paddedTokens: number, runMs: number): void {
    const ceiling = initialBudget(state.model, this.#options.maxBatchTokens);
    state.budget = adaptedBudget(state.budget, ceiling, paddedTokens, runMs, this.#options.targetBatchMs);
  }

  #wakeIdle(): void {
    if (this.#capacity.queued !== 0 || this.#running !== 0 || this.#interactiveRunning()) return;
    const waiters = this.#idleWaiters;
    this.#idleWaiters = [];
    for (const resolve of waiters) resolve();
  }
}
