import { ErrorCode, ShoalError } from '../protocol/errors.js';
import type { RuntimeOptions } from '../runtime/ort-session.js';
import { siblingModule, spawnThread } from '../runtime/spawn.js';
import { ThreadClient } from '../runtime/thread-rpc.js';
import type { TuningPoint } from './batch-tuning.js';
import type { ItemOutput, Prepared, RunOptions, RunnerInfo } from './family.js';
import type { ModelProfile } from './profile.js';
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
 * Model threads, with warm spares: starting a thread and importing the model families, onnxruntime
 * and sharp takes several hundred milliseconds, more than creating a small model's session. A
 * spare thread that has already done it makes a cold model load that much faster. Taking a spare
 * does not start the next one: the pool calls replenish() after it has measured the load's memory,
 * so a starting thread's imports are not charged to the model being loaded.
 */
export class ModelThreads {
  readonly #spares: number;
  readonly #ready: Promise<ThreadClient<ModelRequest, ModelResponse> | null>[] = [];
  #closed = false;

  constructor(spares = 1) {
    this.#spares = Math.max(0, spares);
    for (let i = 0; i < this.#spares; i++) this.#ready.push(this.#spawnWarm());
  }

  #spawn(): ThreadClient<ModelRequest, ModelResponse> {
    const raw = spawnThread(siblingModule(import.meta.url, 'model-thread'), { name: 'shoal-model' });
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

  /** A thread for a model: a warm spare when one is ready, else a new one. */
  async take(name: string): Promise<ThreadClient<ModelRequest, ModelResponse>> {
    let thread: ThreadClient<ModelRequest, ModelResponse> | null = null;
    const spare = this.#ready.shift();
    if (spare !== undefined && !this.#closed) thread = await spare;
    if (thread === null || !thread.alive) thread = this.#spawn();
    thread.rename(`model thread for ${name}`);
    return thread;
  }

  /** Starts spares until the configured number are ready or starting. */
  replenish(): void {
    while (!this.#closed && this.#ready.length < this.#spares) this.#ready.push(this.#spawnWarm());
  }

  async close(): Promise<void> {
    this.#closed = true;
    const spares = this.#ready.splice(0);
    await Promise.all(spares.map(async (spare) => (await spare)?.close()));
  }
}

export class ModelWorker {
  readonly profile: ModelProfile;
  readonly #thread: ThreadClient<ModelRequest, ModelResponse>;
  #info: RunnerInfo | null = null;
  #closing: Promise<void> | null = null;

  private constructor(profile: ModelProfile, thread: ThreadClient<ModelRequest, ModelResponse>) {
    this.profile = profile;
    this.#thread = thread;
  }

  /** Loads the model in `thread` (e.g. from ModelThreads.take), or in a new thread. */
  static async start(
    profile: ModelProfile,
    runtime: RuntimeOptions,
    given?: ThreadClient<ModelRequest, ModelResponse>,
  ): Promise<{ worker: ModelWorker; loadMs: number }> {
    let thread: ThreadClient<ModelRequest, ModelResponse>;
    if (given !== undefined) {
      thread = given;
    } else {
      const raw = spawnThread(siblingModule(import.meta.url, 'model-thread'), { name: `shoal-model-${profile.id}` });
      thread = new ThreadClient<ModelRequest, ModelResponse>(raw, { name: `model thread for ${profile.id}` });
    }
    const worker = new ModelWorker(profile, thread);
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

  /** Releases the sessions in the thread, then stops it. Idempotent. */
  close(): Promise<void> {
    this.#closing ??= (async () => {
      try {
        if (this.#thread.alive) await this.#thread.request({ type: 'release' });
      } finally {
        await this.#thread.close();
      }
    })();
    return this.#closing;
  }
}
