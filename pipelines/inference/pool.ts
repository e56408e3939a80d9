import { ErrorCode, ShoalError, toShoalError } from '../../adapters/protocol/errors.js';
import { ModelWorker } from '../../adapters/model-threads/model-worker.js';
import type { LoadedModel, ModelLease } from './loaded-model.js';
import { startMeasuredSession } from './measured-load.js';
import { formatBytes } from './memory.js';
import { idledOut, lruIdle, memoryHolders, residentModel, type Entry } from './pool-entries.js';
import type { EvictionReason, ModelPoolOptions, PoolSnapshot } from './pool-options.js';
import { ChangeSignal, ExclusiveSections, deferred } from './pool-sync.js';

/**
 * Owns every loaded model under an explicit memory budget.
 * - Load at first use; concurrent first requests share one load (single flight); a failed load is
 *   forgotten so a later request retries it.
 * - A model is charged its predicted bytes before it loads and max(predicted, measured RSS growth)
 *   after; loads are serialized so the RSS growth belongs to that model. Admission evicts the least
 *   recently used idle models until the new one fits, and never admits past the budget.
 * - Models with leases (requests in flight or queued) and pinned models are never evicted.
 * The types it takes and reports are in pool-options.ts and loaded-model.ts; its records of models
 * in pool-entries.ts; the measured start of a session in measured-load.ts.
 */

const DEFAULT_ADMISSION_TIMEOUT_MS = 60_000;

export class ModelPool {
  readonly #options: ModelPoolOptions;
  readonly #entries = new Map<string, Entry>();
  /** Bytes of evicted models whose sessions are still being released. */
  #releasingBytes = 0;
  /** Loads and evictions run one at a time, never interleaved (see pool-sync.ts). */
  readonly #sections = new ExclusiveSections();
  /** Fires when a lease is released or a model's residency changes: waiting loads look again. */
  readonly #changed = new ChangeSignal();
  #idleTimer: NodeJS.Timeout | null = null;
  #useSeq = 0;
  #closed = false;
  /** Interactive sessions being created (ensureInteractive), which close() waits for. */
  readonly #creating = new Set<Promise<boolean>>();

  constructor(options: ModelPoolOptions) {
    if (!(options.budgetBytes > 0)) throw new ShoalError(ErrorCode.CONFIG_INVALID, 'the memory budget must be a positive number of bytes');
    this.#options = options;
    const idle = options.idleEvictMs ?? null;
    if (idle !== null) {
      this.#idleTimer = setInterval(() => void this.#evictIdle(idle), Math.max(250, Math.min(idle / 2, 30_000)));
      this.#idleTimer.unref();
    }
  }

  get budgetBytes(): number {
    return this.#options.budgetBytes;
  }

  /** Charged bytes of resident and loading models, plus models still being released. */
  get residentBytes(): number {
    let total = this.#releasingBytes;
    for (const entry of this.#entries.values()) total += entry.chargedBytes;
    return total;
  }

  /** Loads the model if needed and holds it resident until the lease is released. */
  async acquire(name: string): Promise<ModelLease> {
    if (this.#closed) throw new ShoalError(ErrorCode.UNAVAILABLE, 'the model pool is closed');
    const entry = this.#entries.get(name) ?? this.#startLoad(name);
    entry.leases++;
    let model: LoadedModel;
    try {
      model = await entry.ready;
    } catch (error) {
      entry.leases--;
      throw error;
    }
    this.#touch(entry);
    let released = false;
    return {
      model,
      release: () => {
        if (released) return;
        released = true;
        entry.leases--;
        this.#touch(entry);
        this.#notify();
      },
    };
  }

  /** Loads a model ahead of traffic; pinned models are never evicted. */
  async preload(name: string, pin = false): Promise<LoadedModel> {
    const lease = await this.acquire(name);
    const entry = this.#entries.get(name);
    if (pin && entry !== undefined) entry.pinned = true;
    lease.release();
    this.#emitChange();
    return lease.model;
  }

  unpin(name: string): boolean {
    const entry = this.#entries.get(name);
    if (entry === undefined || !entry.pinned) return false;
    entry.pinned = false;
    this.#notify();
    return true;
  }

  /** Unloads a model now; fails with UNAVAILABLE while requests are using it. */
  async unload(name: string): Promise<boolean> {
    const entry = this.#entries.get(name);
    if (entry === undefined) return false;
    if (entry.state === 'loading') {
      await entry.ready.catch(() => undefined);
      return this.unload(name);
    }
    if (entry.leases > 0) {
      throw new ShoalError(ErrorCode.UNAVAILABLE, `model ${name} has ${entry.leases} request(s) in flight; unload it when they finish`);
    }
    await this.#sections.run(() => this.#evict(entry, 'explicit'));
    return true;
  }

  snapshot(): PoolSnapshot {
    const models = [...this.#entries.values()].map(residentModel);
    return {
      budgetBytes: this.budgetBytes,
      residentBytes: this.residentBytes,
      pinnedCount: models.filter((m) => m.pinned).length,
      models,
    };
  }

  /**
   * Gives a leased model a second session for the interactive lane, if it fits in the budget now
   * (idle models may be evicted for it, busy ones are not waited for). Returns whether it has one.
   *
   * The engine starts this in the background (the first interactive request does not wait for it),
   * so it can still be creating the session when close() is called: close() waits for it (see
   * #creating), and a session created for a closed pool or an evicted model is released here.
   */
  ensureInteractive(lease: ModelLease): Promise<boolean> {
    if (lease.model.interactive !== null) return Promise.resolve(true);
    if (this.#closed) return Promise.resolve(false);
    const creation = this.#createInteractive(lease);
    this.#creating.add(creation);
    // Both ways, so this bookkeeping adds no unhandled rejection of its own (the caller handles the result).
    const forget = (): void => void this.#creating.delete(creation);
    creation.then(forget, forget);
    return creation;
  }

  async #createInteractive(lease: ModelLease): Promise<boolean> {
    const model = lease.model;
    const predict = this.#options.predictInteractive;
    const runtime = this.#options.interactiveRuntime;
    const entry = this.#entries.get(model.name);
    if (predict === undefined || runtime === undefined || entry === undefined || entry.model !== model) return false;
    const extra = await predict(model.profile);
    return this.#sections.run(async () => {
      if (model.interactive !== null) return true;
      // Closed or evicted while this waited for the lock: no thread is started for a model that is gone.
      if (this.#closed || this.#entries.get(model.name) !== entry) return false;
      if (!(await this.#makeRoom(extra, entry, 0))) return false;
      entry.chargedBytes += extra;
      let worker: ModelWorker;
      try {
        const threads = this.#options.threads;
        const thread = await threads?.take(model.name, runtime.nice);
        worker = (await ModelWorker.start(model.profile, runtime, thread, threads?.recycler(runtime.nice))).worker;
      } catch {
        entry.chargedBytes -= extra;
        return false;
      }
      if (this.#closed || this.#entries.get(model.name) !== entry) {
        // close() (or an eviction outside the lock, which only close() does) took the model away
        // while the session was being created: #evict saw no interactive session to close, so it
        // is released here, before the caller goes on to stop the threads and exit. Left alone, its
        // thread would outlive close() and be killed at process exit, aborting the process if
        // that lands while onnxruntime is still creating the session.
        entry.chargedBytes -= extra;
        await worker.close();
        return false;
      }
      this.#options.threads?.replenish();
      model.interactive = worker;
      this.#emitChange();
      return true;
    });
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    if (this.#idleTimer !== null) clearInterval(this.#idleTimer);
    const entries = [...this.#entries.values()];
    await Promise.all([
      ...entries.map(async (entry) => {
        await entry.ready.catch(() => undefined);
        if (this.#entries.get(entry.name) === entry) await this.#evict(entry, 'shutdown');
      }),
      // Interactive sessions still being created: their thread is inside onnxruntime's session
      // creation, and stopping it there (ModelThreads.close, process exit) aborts the whole process
      // ("terminate called after throwing an instance of 'Napi::Error'"). Each one sees the pool
      // closed once its session exists and releases it; close() returns only after that.
      ...[...this.#creating].map((creation) => creation.catch(() => false)),
    ]);
  }

  #startLoad(name: string): Entry {
    const ready = deferred<LoadedModel>();
    // Waiters attach their own handlers; this one only keeps a rejection from being unhandled.
    ready.promise.catch(() => undefined);
    const entry: Entry = {
      name,
      state: 'loading',
      ready: ready.promise,
      model: null,
      chargedBytes: 0,
      leases: 0,
      pinned: false,
      lastUsed: Date.now(),
      useSeq: ++this.#useSeq,
    };
    this.#entries.set(name, entry);
    this.#load(entry).then(ready.resolve, (error: unknown) => {
      const failure = toShoalError(error, ErrorCode.MODEL_LOAD_FAILED);
      if (this.#entries.get(name) === entry) this.#entries.delete(name);
      entry.chargedBytes = 0;
      this.#options.hooks?.onLoadError?.({ name, error: failure });
      this.#notify();
      ready.reject(failure);
    });
    return entry;
  }

  async #load(entry: Entry): Promise<LoadedModel> {
    // The model's thread starts now, while the model is resolved and detected (ModelThreads.prestart).
    const giveUpThread = this.#options.threads?.prestart();
    try {
      return await this.#loadOnThread(entry);
    } finally {
      await giveUpThread?.();
    }
  }

  async #loadOnThread(entry: Entry): Promise<LoadedModel> {
    const profile = await this.#options.resolve(entry.name);
    const predicted = await this.#options.predict(profile);
    if (predicted > this.budgetBytes) {
      throw new ShoalError(
        ErrorCode.MODEL_TOO_LARGE,
        `model ${entry.name} needs about ${formatBytes(predicted)}, more than the whole memory budget (${formatBytes(this.budgetBytes)}); raise --memory-budget / SHOAL_MEMORY_BUDGET or set memory.bytes for it in the catalog`,
        { details: { predictedBytes: predicted, budgetBytes: this.budgetBytes } },
      );
    }
    const timeout = this.#options.admissionTimeoutMs ?? DEFAULT_ADMISSION_TIMEOUT_MS;
    return this.#sections.run(async () => {
      if (this.#closed) throw new ShoalError(ErrorCode.UNAVAILABLE, 'the model pool is closed');
      await this.#makeRoom(predicted, entry, timeout);
      entry.chargedBytes = predicted;
      this.#emitChange();
      const { worker, loadMs, batchTokens, measuredBytes: measured, startedAt: started } = await startMeasuredSession(profile, this.#options.runtime, this.#options.threads, this.#options.tune);
      this.#options.threads?.replenish();
      const charged = profile.memory.bytes ?? Math.max(predicted, measured);
      if (charged > entry.chargedBytes) {
        // Measured larger than predicted: make room among idle models for the difference before
        // charging it, so the accounted bytes never exceed the budget; if that is impossible, give
        // the model back instead of staying over budget.
        try {
          await this.#makeRoom(charged - entry.chargedBytes, entry, timeout);
        } catch (error) {
          await worker.close();
          throw error;
        }
      }
      entry.chargedBytes = charged;
      const model: LoadedModel = {
        name: entry.name,
        profile,
        worker,
        interactive: null,
        loadedAt: Date.now(),
        loadMs,
        predictedBytes: predicted,
        measuredBytes: measured,
        batchTokens,
      };
      entry.model = model;
      entry.state = 'ready';
      this.#options.hooks?.onLoad?.({
        name: entry.name,
        family: profile.family,
        seconds: (performance.now() - started) / 1000,
        predictedBytes: predicted,
        measuredBytes: measured,
      });
      this.#notify();
      return model;
    });
  }

  /**
   * Evicts least recently used idle models until `needed` more bytes fit. Waits up to `timeoutMs`
   * for busy models to become idle; with timeout 0 it returns false instead of waiting.
   */
  async #makeRoom(needed: number, self: Entry, timeoutMs: number): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if (this.residentBytes + needed <= this.budgetBytes) return true;
      const victim = lruIdle(this.#entries.values(), self);
      if (victim !== null) {
        await this.#evict(victim, 'capacity');
        continue;
      }
      const left = deadline - Date.now();
      if (left <= 0) {
        if (timeoutMs === 0) return false;
        const busy = memoryHolders(this.#entries.values(), self);
        throw new ShoalError(
          ErrorCode.OVERLOADED,
          `no memory for model ${self.name} within ${timeoutMs} ms: the budget (${formatBytes(this.budgetBytes)}) is held by models in use: ${busy.join(', ')}`,
          { details: { retryAfterSeconds: 5 } },
        );
      }
      await this.#changed.wait(left);
    }
  }

  #touch(entry: Entry): void {
    entry.lastUsed = Date.now();
    entry.useSeq = ++this.#useSeq;
  }

  async #evict(entry: Entry, reason: EvictionReason): Promise<void> {
    if (this.#entries.get(entry.name) !== entry) return;
    this.#entries.delete(entry.name);
    const bytes = entry.chargedBytes;
    this.#releasingBytes += bytes;
    try {
      const model = entry.model;
      if (model !== null) {
        // Evicted to make room for a load: its threads serve the next model (no thread start-up).
        // Unloaded, idle or shutting down: its threads stop, so their memory goes back to the OS.
        const reuse = reason === 'capacity' && this.#options.reuseThreads !== false;
        await Promise.all([model.worker.close({ reuseThread: reuse }), model.interactive?.close({ reuseThread: reuse })]);
      }
    } finally {
      this.#releasingBytes -= bytes;
      this.#options.hooks?.onEvict?.({ name: entry.name, reason, bytes });
      this.#notify();
    }
  }

  async #evictIdle(idleMs: number): Promise<void> {
    const now = Date.now();
    for (const entry of [...this.#entries.values()]) {
      if (idledOut(entry, now, idleMs)) {
        await this.#sections.run(() => this.#evict(entry, 'idle'));
      }
    }
  }

  #notify(): void {
    this.#changed.notify();
    this.#emitChange();
  }

  #emitChange(): void {
    this.#options.hooks?.onChange?.(this.snapshot());
  }
}
