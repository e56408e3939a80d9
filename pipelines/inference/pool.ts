import { ErrorCode, ShoalError, toShoalError } from '../../adapters/protocol/errors.js';
import type { RuntimeOptions } from '../../adapters/runtime/ort-session.js';
import { ModelWorker } from '../../adapters/models/model-worker.js';
import type { ModelProfile } from '../../adapters/models/profile.js';

/**
 * Owns every loaded model. A model is loaded at its first request; concurrent first requests share
 * one load (single flight); a failed load is forgotten so a later request can retry.
 */

export interface LoadedModel {
  name: string;
  profile: ModelProfile;
  worker: ModelWorker;
  loadedAt: number;
  loadMs: number;
  lastUsed: number;
}

export interface ModelPoolOptions {
  resolve: (name: string) => Promise<ModelProfile>;
  runtime: RuntimeOptions;
}

export class ModelPool {
  readonly #options: ModelPoolOptions;
  readonly #models = new Map<string, Promise<LoadedModel>>();
  #closed = false;

  constructor(options: ModelPoolOptions) {
    this.#options = options;
  }

  acquire(name: string): Promise<LoadedModel> {
    if (this.#closed) return Promise.reject(new ShoalError(ErrorCode.UNAVAILABLE, 'the engine is closed'));
    let loading = this.#models.get(name);
    if (loading === undefined) {
      loading = this.#load(name);
      this.#models.set(name, loading);
      loading.catch(() => {
        if (this.#models.get(name) === loading) this.#models.delete(name);
      });
    }
    return loading.then((model) => {
      model.lastUsed = Date.now();
      return model;
    });
  }

  async #load(name: string): Promise<LoadedModel> {
    let profile: ModelProfile;
    try {
      profile = await this.#options.resolve(name);
    } catch (error) {
      throw toShoalError(error, ErrorCode.MODEL_LOAD_FAILED);
    }
    const { worker, loadMs } = await ModelWorker.start(profile, this.#options.runtime);
    const now = Date.now();
    return { name, profile, worker, loadedAt: now, loadMs, lastUsed: now };
  }

  /** Models loaded (or loading) now. */
  async list(): Promise<LoadedModel[]> {
    const settled = await Promise.allSettled([...this.#models.values()]);
    return settled.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
  }

  async unload(name: string): Promise<boolean> {
    const loading = this.#models.get(name);
    if (loading === undefined) return false;
    this.#models.delete(name);
    try {
      const model = await loading;
      await model.worker.close();
    } catch {
      // A model that failed to load has nothing to release.
    }
    return true;
  }

  async close(): Promise<void> {
    this.#closed = true;
    const names = [...this.#models.keys()];
    await Promise.all(names.map((name) => this.unload(name)));
  }
}
