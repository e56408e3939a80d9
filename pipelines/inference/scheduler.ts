import { ErrorCode, ShoalError, toShoalError } from '../../adapters/protocol/errors.js';
import type { Priority } from '../../adapters/protocol/requests.js';
import { preparedCost, type ItemOutput, type Prepared, type RunOptions } from '../../adapters/models/family.js';
import type { ModelWorker } from '../../adapters/model-threads/model-worker.js';
import type { CompareTo } from '../../adapters/model-threads/thread-messages.js';
import type { LoadedModel } from './pool.js';
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
 */

export interface SchedulerOptions {
  maxBatchTokens: number;
  maxBatchItems: number;
  /** Longest wait for more items to fill a bulk batch while its model still has items in preparation. */
  maxWaitMs: number;
  /** Bulk/primary batches running at once over all models (1 on CPU: a batch already uses every core). */
  maxConcurrentBatches: number;
  /** Items waiting over all models before bulk submitters must wait. */
  maxQueuedItems: number;
  maxPadRatio: number;
  padSlackTokens: number;
  /** A waiting item older than this anchors the next batch of its model. */
  maxItemWaitMs: number;
  /** Adapt each model's token budget so a bulk batch takes about this long; null = fixed budget. */
  targetBatchMs: number | null;
  hooks?: SchedulerHooks | undefined;
}

export const DEFAULT_SCHEDULER_OPTIONS: SchedulerOptions = Object.freeze({
  // 1,024: best or within a few percent of best fp32 ceiling on every machine measured, and
  // without the CPU arena (workers) 2,048-token batches lost 15-35 % to fresh memory mappings
  // (README, CPU arena; bench/throughput.ts).
  maxBatchTokens: 1024,
  maxBatchItems: 256,
  maxWaitMs: 2,
  maxConcurrentBatches: 1,
  maxQueuedItems: 50_000,
  maxPadRatio: 0.25,
  padSlackTokens: 8,
  maxItemWaitMs: 2_000,
  targetBatchMs: null,
});

export interface BatchEvent {
  model: string;
  lane: Priority;
  items: number;
  realTokens: number;
  paddedTokens: number;
  runMs: number;
  /** Longest time an item of the batch waited in the queue. */
  queueMs: number;
  error?: ShoalError;
}

export interface SchedulerHooks {
  onBatch?(event: BatchEvent): void;
}

export interface Submission {
  model: LoadedModel;
  lane: Priority;
  items: Prepared[];
  options: RunOptions;
  compareTo?: CompareTo | undefined;
  signal?: AbortSignal | undefined;
  /** Epoch ms after which unstarted items fail with TIMEOUT. */
  deadline?: number | undefined;
}

interface RequestState {
  id: number;
  submission: Submission;
  outputs: ItemOutput[];
  remaining: number;
  settled: boolean;
  /** Run alone after a mixed batch failed, so its own failure is final. */
  isolated: boolean;
  resolve: (outputs: ItemOutput[]) => void;
  reject: (error: ShoalError) => void;
  queued: Set<Queued<WorkItem>>;
  /** Removes the abort listener: a caller may reuse one signal for many requests. */
  detach: () => void;
}

interface WorkItem {
  request: RequestState;
  index: number;
  prepared: Prepared;
}

interface ModelState {
  name: string;
  model: LoadedModel;
  queue: ModelWorkQueue<WorkItem>;
  /** Batches sent to the primary session and not finished (one running, at most one queued behind it). */
  primaryInFlight: number;
  /** When an interactive item of this model last arrived (epoch ms). */
  lastInteractiveAt: number;
  interactiveBusy: boolean;
  /** Virtual time for fair share: tokens served, normalized. */
  served: number;
  /** Requests of this model whose items are still being prepared. */
  preparing: number;
  /** Adapted token budget (targetBatchMs). */
  budget: number;
  timer: NodeJS.Timeout | null;
}

/** Batches a primary session may hold: the running one and one queued behind it. */
const PIPELINE_DEPTH = 2;
/** Interactive traffic this recent on a model without an interactive session disables queuing ahead. */
const INTERACTIVE_RECENT_MS = 10_000;

function optionsKey(submission: Submission, id: number): string {
  // Items scored against a reference can only share a batch with that request's items.
  const compare = submission.compareTo === undefined ? '' : `#${id}`;
  return `${JSON.stringify(submission.options)}${compare}`;
}

export class Scheduler {
  readonly #options: SchedulerOptions;
  readonly #models = new Map<string, ModelState>();
  /** Requests not yet settled. */
  readonly #requests = new Set<RequestState>();
  #running = 0;
  #queuedItems = 0;
  /** The same count per lane (queue depth per lane, `shoal_queue_items{lane}`). */
  readonly #queuedByLane: Record<Priority, number> = { interactive: 0, bulk: 0 };
  #nextId = 1;
  #capacityWaiters: { items: number; resolve: () => void }[] = [];
  #idleWaiters: (() => void)[] = [];
  #closed = false;

  constructor(options: Partial<SchedulerOptions> = {}) {
    this.#options = { ...DEFAULT_SCHEDULER_OPTIONS, ...options };
  }

  get queuedItems(): number {
    return this.#queuedItems;
  }

  /** Items waiting per lane. */
  get queuedByLane(): Readonly<Record<Priority, number>> {
    return { ...this.#queuedByLane };
  }

  get runningBatches(): number {
    return this.#running;
  }

  /** Whether `items` more bulk items fit in the queue now (callers that cannot wait answer OVERLOADED). */
  hasCapacity(items: number): boolean {
    return this.#queuedItems === 0 || this.#queuedItems + items <= this.#options.maxQueuedItems;
  }

  /** Resolves when `items` more bulk items fit in the queue. */
  waitForCapacity(items: number, signal?: AbortSignal): Promise<void> {
    if (this.hasCapacity(items)) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const onAbort = (): void => {
        this.#capacityWaiters = this.#capacityWaiters.filter((w) => w !== waiter);
        reject(new ShoalError(ErrorCode.CANCELLED, 'the request was cancelled'));
      };
      const waiter = {
        items,
        resolve: () => {
          signal?.removeEventListener('abort', onAbort);
          resolve();
        },
      };
      this.#capacityWaiters.push(waiter);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  /** Declares that items of `model` are being prepared (bulk batches may wait briefly for them). */
  preparing(model: LoadedModel): () => void {
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
      const request: RequestState = {
        id,
        submission,
        outputs: new Array<ItemOutput>(submission.items.length),
        remaining: submission.items.length,
        settled: false,
        isolated: false,
        resolve,
        reject,
        queued: new Set(),
        detach: () => undefined,
      };
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
    if (this.#queuedItems === 0 && this.#running === 0 && !this.#interactiveRunning()) return Promise.resolve();
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

  #state(model: LoadedModel): ModelState {
    let state = this.#models.get(model.name);
    if (state === undefined || state.model.worker !== model.worker) {
      // First use, or the model was evicted and reloaded: the queue starts fresh but keeps fairness.
      const served = state?.served ?? this.#minServed();
      state = {
        name: model.name,
        model,
        queue: state?.queue ?? new ModelWorkQueue<WorkItem>(),
        primaryInFlight: 0,
        lastInteractiveAt: state?.lastInteractiveAt ?? 0,
        interactiveBusy: false,
        served,
        preparing: state?.preparing ?? 0,
        budget: this.#budgetFor(model),
        timer: null,
      };
      this.#models.set(model.name, state);
    }
    return state;
  }

  #budgetFor(model: LoadedModel): number {
    if (model.batchTokens !== null) return model.batchTokens;
    const override = model.profile.options.maxBatchTokens;
    return typeof override === 'number' && override > 0 ? override : this.#options.maxBatchTokens;
  }

  #minServed(): number {
    let min: number | null = null;
    for (const state of this.#models.values()) {
      if (state.queue.bulkSize > 0 && (min === null || state.served < min)) min = state.served;
    }
    return min ?? 0;
  }

  #enqueue(request: RequestState, items: WorkItem[], key: string): void {
    const state = this.#state(request.submission.model);
    const now = Date.now();
    if (state.queue.bulkSize === 0 && request.submission.lane === 'bulk') {
      // A model that was idle joins the fair share at the current level instead of hoarding credit.
      state.served = Math.max(state.served, this.#minServed());
    }
    for (const payload of items) {
      const queued: Queued<WorkItem> = { payload, cost: preparedCost(payload.prepared), key, enqueuedAt: now, gone: false };
      request.queued.add(queued);
      if (request.submission.lane === 'interactive') {
        state.queue.addInteractive(queued);
        state.lastInteractiveAt = now;
      }
      else state.queue.addBulk(queued);
      this.#queuedItems++;
      this.#queuedByLane[request.submission.lane]++;
    }
  }

  #cutOptions(state: ModelState): CutOptions {
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
      } else if (dedicated === null && state.primaryInFlight === 0 && this.#busyWorkers() < this.#options.maxConcurrentBatches) {
        const batch = state.queue.cutInteractive(this.#cutOptions(state));
        if (batch !== null) this.#start(state, batch, 'interactive', state.model.worker);
      }
    }
    for (;;) {
      const state = this.#nextBulkModel();
      if (state === null) break;
      const batch = state.queue.cutBulk(this.#cutOptions(state), Date.now());
      if (batch === null) break;
      this.#start(state, batch, 'bulk', state.model.worker);
    }
  }

  /** The least-served model whose bulk work may start now (interactive work of a model blocks its bulk). */
  #nextBulkModel(): ModelState | null {
    let best: ModelState | null = null;
    const now = Date.now();
    // A model waiting for a slot keeps running models from queuing ahead (fair share first).
    let waiting = false;
    for (const state of this.#models.values()) {
      if (state.queue.bulkSize > 0 && state.primaryInFlight === 0) waiting = true;
    }
    for (const state of this.#models.values()) {
      if (state.queue.bulkSize === 0 || !this.#canStartBulk(state, now)) continue;
      if (waiting && state.primaryInFlight > 0) continue;
      if (state.queue.interactiveSize > 0 && state.model.interactive === null) continue;
      if (!this.#bulkReady(state, now)) continue;
      if (best === null || state.served < best.served) best = state;
    }
    return best;
  }

  /** Models whose primary session has batches in flight: each holds one of the concurrent slots. */
  #busyWorkers(): number {
    let busy = 0;
    for (const state of this.#models.values()) if (state.primaryInFlight > 0) busy++;
    return busy;
  }

  /**
   * A bulk batch may start on an idle primary session if a slot is free, or be queued one batch
   * ahead of the running one (so the model thread never waits for the next batch) — unless the
   * model serves recent interactive traffic on its primary session, which must then wait behind at
   * most the batch already running.
   */
  #canStartBulk(state: ModelState, now: number): boolean {
    if (state.primaryInFlight === 0) return this.#busyWorkers() < this.#options.maxConcurrentBatches;
    const interactiveOnPrimary = state.model.interactive === null && now - state.lastInteractiveAt < INTERACTIVE_RECENT_MS;
    return !interactiveOnPrimary && state.primaryInFlight < PIPELINE_DEPTH;
  }

  /** Whether a bulk batch of this model should go now rather than wait to fill up. */
  #bulkReady(state: ModelState, now: number): boolean {
    if (state.preparing === 0 || this.#options.maxWaitMs <= 0) return true;
    if (state.queue.bulkTokens() >= state.budget) return true;
    const oldest = state.queue.oldestBulk();
    const waited = oldest === undefined ? 0 : now - oldest.enqueuedAt;
    if (waited >= this.#options.maxWaitMs) return true;
    if (state.timer === null) {
      state.timer = setTimeout(() => {
        state.timer = null;
        this.#pump();
      }, this.#options.maxWaitMs - waited);
      state.timer.unref();
    }
    return false;
  }

  #start(state: ModelState, cut: CutBatch<WorkItem>, lane: Priority, worker: ModelWorker): void {
    const now = Date.now();
    const items: WorkItem[] = [];
    let queueMs = 0;
    for (const queued of cut.items) {
      this.#queuedItems--;
      const request = queued.payload.request;
      this.#queuedByLane[request.submission.lane]--;
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
    this.#wakeCapacity();
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
        const event: BatchEvent = { model: state.name, lane, items: items.length, realTokens, paddedTokens: padded, runMs, queueMs };
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
        this.#queuedItems--;
        this.#queuedByLane[request.submission.lane]--;
      }
    }
    request.queued.clear();
    request.detach();
    request.reject(error);
    this.#wakeCapacity();
    this.#wakeIdle();
  }

  /** Moves a model's token budget toward the target batch time (exponential smoothing). */
  #adapt(state: ModelState, paddedTokens: number, runMs: number): void {
    const target = this.#options.targetBatchMs;
    if (target === null || runMs <= 0 || paddedTokens <= 0) return;
    const wanted = (paddedTokens / runMs) * target;
    const next = 0.7 * state.budget + 0.3 * wanted;
    state.budget = Math.round(Math.min(this.#budgetFor(state.model), Math.max(256, next)));
  }

  #wakeCapacity(): void {
    const waiting = this.#capacityWaiters;
    this.#capacityWaiters = [];
    for (const waiter of waiting) {
      if (this.hasCapacity(waiter.items)) waiter.resolve();
      else this.#capacityWaiters.push(waiter);
    }
  }

  #wakeIdle(): void {
    if (this.#queuedItems !== 0 || this.#running !== 0 || this.#interactiveRunning()) return;
    const waiters = this.#idleWaiters;
    this.#idleWaiters = [];
    for (const resolve of waiters) resolve();
  }
}
