import { ErrorCode, ShoalError } from '../protocol/errors.js';
import { returnFreedMemory } from '../runtime/native-memory.js';
import type { RuntimeOptions } from '../runtime/runtime-options.js';
import { siblingModule, spawnThread } from '../support/spawn-thread.js';
import { adoptEarlyThread } from './early-threads.js';
import { ThreadClient } from '../support/thread-rpc.js';
import type { TuningPoint } from './batch-tuning.js';
import type { ItemOutput, Prepared, RunOptions, RunnerInfo } from '../models/family.js';
import type { ModelProfile } from '../models/profile.js';
import type { CompareTo, ModelRequest, ModelResponse } from './thread-messages.js';

/**
 * Main-thread handle on one loaded model: a dedicated thread holding its ONNX session(s).
 * `close()` releases the sessions inside the thread before stopping it, so native memory is freed.
 */

export interface RunResult {
  outputs: ItemOutput[];
  runMs: number;
}

/**
 * Model threads, with warm spares: starting a thread and importing onnxruntime and zod takes
 * 150 ms from compiled JavaScript (about 500 ms under tsx), more than creating a small model's
 * session; the family's adapter is imported at load (family-loaders.ts). A
 * spare thread that has already done it makes a cold model load that much faster. Taking a spare
 * does not start the next one: the pool calls replenish() after it has measured the load's memory,
 * so a starting thread's imports are not charged to the model being loaded.
 *
 * Threads are recycled: a model evicted to make room for another releases its sessions and gives
 * its thread back, kept as a spare while at most `spares` others are ready (else stopped). A pool that swaps models all
 * the time then reuses threads instead of starting one per load. A thread remembers the nice
 * value its sessions ran at: nice can be raised but not lowered again without privileges, so a
 * load at nice N only reuses a thread at nice ≤ N.
 */
interface ReadyThread {
  thread: Promise<ThreadClient<ModelRequest, ModelResponse> | null>;
  nice: number;
}

export class ModelThreads {
  readonly #spares: number;
  readonly #returnMemory: boolean;
  readonly #ready: ReadyThread[] = [];
  #closed = false;

  /**
   * @param spares idle threads kept started.
   * @param returnMemory hand what a stopped thread freed back to the OS (malloc_trim; runtime option `returnFreedMemory`).
   */
  constructor(spares = 1, returnMemory = true) {
    this.#spares = Math.max(0, spares);
    this.#returnMemory = returnMemory;
    for (let i = 0; i < this.#spares; i++) this.#ready.push({ thread: this.#spawnWarm(), nice: 0 });
  }

  #spawn(): ThreadClient<ModelRequest, ModelResponse> {
    const raw = adoptEarlyThread('model') ?? spawnThread(siblingModule(import.meta.url, 'model-thread'), { name: 'shoal-model' });
    return new ThreadClient<ModelRequest, ModelResponse>(raw, { name: 'model thread' });
  }

  async #spawnWarm(): Promise<ThreadClient<ModelRequest, ModelResponse> | null> {
    const thread = this.#spawn();
    try {
      await thread.request({ type: 'ping' });
      return thread;
    } catch {
      // A spare that failed to start is simply not used; take() starts a fresh thread instead.
      await thread.close();
      return null;
    }
  }

  /** Threads ready now (started or recycled), for tests and metrics. */
  get readyCount(): number {
    return this.#ready.length;
  }

  /**
   * A thread for a model whose sessions run at `nice`: a ready thread at exactly that nice value
   * (a recycled one), else one at a lower value, else a new one.
   */
  async take(name: string, nice = 0): Promise<ThreadClient<ModelRequest, ModelResponse>> {
    // After close() nothing would ever stop a thread started now: it would be killed at process
    // exit, possibly in the middle of creating a session, which aborts the process.
    if (this.#closed) throw new ShoalError(ErrorCode.UNAVAILABLE, 'the model threads are closed');
    let thread: ThreadClient<ModelRequest, ModelResponse> | null = null;
    const exact = this.#ready.findIndex((ready) => ready.nice === nice);
    const index = exact >= 0 ? exact : this.#ready.findIndex((ready) => ready.nice <= nice);
    const ready = index >= 0 ? this.#ready.splice(index, 1)[0] : undefined;
    if (ready !== undefined) thread = await ready.thread;
    if (this.#closed) {
      // Closed while the spare was starting: close() no longer owns it (it was taken), so stop it here.
      await thread?.close();
      throw new ShoalError(ErrorCode.UNAVAILABLE, 'the model threads are closed');
    }
    if (thread === null || !thread.alive) thread = this.#spawn();
    thread.rename(`model thread for ${name}`);
    return thread;
  }

  /**
   * Starts a thread for a load about to begin when none is ready or starting, so that its imports
   * (onnxruntime, zod: 0.3 s) run while the prep thread detects the model instead of after it; a
   * one-shot `shoal encode` has no spare (spares 0) and otherwise paid them on its critical path.
   * take() finds the thread among the ready ones. The returned function gives the thread up again
   * if the load ends without taking it (a failed detection) and it is beyond the spare count.
   */
  prestart(): () => Promise<void> {
    if (this.#closed || this.#ready.length > 0) return async () => undefined;
    const started: ReadyThread = { thread: this.#spawnWarm(), nice: 0 };
    this.#ready.push(started);
    return async () => {
      const index = this.#ready.indexOf(started);
      if (index < 0 || this.#ready.length <= this.#spares) return;
      this.#ready.splice(index, 1);
      await (await started.thread)?.close();
    };
  }

  /** Takes back the thread of a closed model (its sessions released): kept as a spare, or stopped. */
  async give(thread: ThreadClient<ModelRequest, ModelResponse>, nice: number): Promise<void> {
    // One over the spare count: a thread handed back is ready now, while a replenished spare may
    // still be starting, and the next load (an eviction is usually followed by one) should not wait.
    if (this.#closed || !thread.alive || this.#ready.length > this.#spares) {
      await thread.close();
      // The thread's own heap is gone with it; the allocator still holds the pages.
      if (this.#returnMemory) returnFreedMemory();
      return;
    }
    thread.rename('model thread (spare)');
    this.#ready.push({ thread: Promise.resolve(thread), nice });
  }

  /** The recycle callback for ModelWorker.start of a model whose sessions run at `nice`. */
  recycler(nice: number): RecycleThread {
    return (thread) => this.give(thread, nice);
  }

  /** Starts spares until the configured number are ready or starting. */
  replenish(): void {
    while (!this.#closed && this.#ready.length < this.#spares) this.#ready.push({ thread: this.#spawnWarm(), nice: 0 });
  }

  async close(): Promise<void> {
    this.#closed = true;
    const spares = this.#ready.splice(0);
    await Promise.all(spares.map(async (spare) => (await spare.thread)?.close()));
  }
}

/** Where a closed model's thread goes once its sessions are released (ModelThreads.give). */
export type RecycleThread = (thread: ThreadClient<ModelRequest, ModelResponse>) => Promise<void>;

export class ModelWorker {
  readonly profile: ModelProfile;
  readonly #thread: ThreadClient<ModelRequest, ModelResponse>;
  readonly #recycle: RecycleThread | undefined;
  #info: RunnerInfo | null = null;
  #closing: Promise<void> | null = null;

  private constructor(profile: ModelProfile, thread: ThreadClient<ModelRequest, ModelResponse>, recycle: RecycleThread | undefined) {
    this.profile = profile;
    this.#thread = thread;
    this.#recycle = recycle;
  }

  /**
   * Loads the model in `thread` (e.g. from ModelThreads.take), or in a new thread. With
   * `recycle`, close() hands the thread back once the sessions are released instead of stopping it.
   */
  static async start(
    profile: ModelProfile,
    runtime: RuntimeOptions,
    given?: ThreadClient<ModelRequest, ModelResponse>,
    recycle?: RecycleThread,
  ): Promise<{ worker: ModelWorker; loadMs: number }> {
    let thread: ThreadClient<ModelRequest, ModelResponse>;
    if (given !== undefined) {
      thread = given;
    } else {
      const raw = spawnThread(siblingModule(import.meta.url, 'model-thread'), { name: `shoal-model-${profile.id}` });
      thread = new ThreadClient<ModelRequest, ModelResponse>(raw, { name: `model thread for ${profile.id}` });
    }
    const worker = new ModelWorker(profile, thread, recycle);
    try {
      const response = await thread.request({ type: 'load', profile, runtime });
      if (response.type !== 'loaded') throw new ShoalError(ErrorCode.INTERNAL, `model thread answered ${response.type} to load`);
      worker.#info = response.info;
      return { worker, loadMs: response.loadMs };
    } catch (error) {
      await thread.close();
      if (error instanceof ShoalError && (error.code === ErrorCode.INTERNAL || error.code === ErrorCode.UNAVAILABLE)) {
        throw new ShoalError(ErrorCode.MODEL_LOAD_FAILED, `${profile.id}: ${error.message}`, { cause: error });
      }
      throw error;
    }
  }

  get info(): RunnerInfo {
    if (this.#info === null) throw new ShoalError(ErrorCode.INTERNAL, 'model not loaded');
    return this.#info;
  }

  get alive(): boolean {
    return this.#thread.alive && this.#closing === null;
  }

  get inFlight(): number {
    return this.#thread.pendingCount;
  }

  async run(batch: Prepared[], options: RunOptions, compareTo?: CompareTo): Promise<RunResult> {
    const message: ModelRequest = compareTo === undefined ? { type: 'run', batch, options } : { type: 'run', batch, options, compareTo };
    const response = await this.#thread.request(message);
    if (response.type !== 'ran') throw new ShoalError(ErrorCode.INTERNAL, `model thread answered ${response.type} to run`);
    return { outputs: response.outputs, runMs: response.runMs };
  }

  /** Times the model at each batch budget (see batch-tuning.ts). */
  async tune(budgets: number[], lengths: number[], rounds: number): Promise<TuningPoint[]> {
    const response = await this.#thread.request({ type: 'tune', budgets, lengths, rounds });
    if (response.type !== 'tuned') throw new ShoalError(ErrorCode.INTERNAL, `model thread answered ${response.type} to tune`);
    return response.points;
  }

  /**
   * Releases the sessions in the thread, then stops it, or with `reuseThread` gives it back (to the
   * recycle callback) for the next model. A reused thread keeps some of the freed memory in its
   * allocator, so reuse is for evictions that make room for another load. Idempotent.
   */
  close(options: { reuseThread?: boolean } = {}): Promise<void> {
    this.#closing ??= (async () => {
      let released = false;
      try {
        if (this.#thread.alive) released = (await this.#thread.request({ type: 'release' })).type === 'released';
      } finally {
        // Only a thread that released cleanly and has nothing in flight is reused.
        if (options.reuseThread === true && released && this.#recycle !== undefined && this.#thread.alive && this.#thread.pendingCount === 0) await this.#recycle(this.#thread);
        else await this.#thread.close();
      }
    })();
    return this.#closing;
  }
}
