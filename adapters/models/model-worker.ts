import { ErrorCode, ShoalError } from '../protocol/errors.js';
import type { RuntimeOptions } from '../runtime/ort-session.js';
import { siblingModule, spawnThread } from '../runtime/spawn.js';
import { ThreadClient } from '../runtime/thread-rpc.js';
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

export class ModelWorker {
  readonly profile: ModelProfile;
  readonly #thread: ThreadClient<ModelRequest, ModelResponse>;
  #info: RunnerInfo | null = null;
  #closing: Promise<void> | null = null;

  private constructor(profile: ModelProfile, thread: ThreadClient<ModelRequest, ModelResponse>) {
    this.profile = profile;
    this.#thread = thread;
  }

  static async start(profile: ModelProfile, runtime: RuntimeOptions): Promise<{ worker: ModelWorker; loadMs: number }> {
    const raw = spawnThread(siblingModule(import.meta.url, 'model-thread'), { name: `shoal-model-${profile.id}` });
    const thread = new ThreadClient<ModelRequest, ModelResponse>(raw, { name: `model thread for ${profile.id}` });
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
