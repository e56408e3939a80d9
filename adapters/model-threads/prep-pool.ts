import { availableParallelism } from 'node:os';
import { ErrorCode, ShoalError } from '../protocol/errors.js';
import { siblingModule, spawnThread } from '../support/spawn-thread.js';
import { adoptEarlyThread } from './early-threads.js';
import { ImagePolicy } from '../sources/image-input.js';
import { ThreadClient } from '../support/thread-rpc.js';
import type { Prepared, PrepareRequest } from '../models/family.js';
import type { ModelProfile, ProfileOverrides } from '../models/profile.js';
import type { PrepRequest, PrepResponse, TokenizedOutput } from './thread-messages.js';

/**
 * Main-thread handle on the prep threads. A model folder is always prepared on the same thread
 * (hash affinity), so each tokenizer is loaded once.
 */

export type PrepLane = 'interactive' | 'bulk';

export interface PrepPoolOptions {
  /** Number of prep threads; default 1 (tokenization is cheap next to inference on CPU). */
  threads?: number;
  /** Limits and allowed sources for image items (read in the prep threads). */
  imagePolicy?: ImagePolicy;
  /**
   * Interactive work gets a thread of its own. Off where there is no bulk work for a query to wait
   * behind (a CLI command: one caller); its queries then use the model's bulk thread, which the
   * CLI started early, instead of starting (and importing the tokenizers in) another one. @default true
   */
  interactiveThread?: boolean;
}

function hash(text: string): number {
  let h = 2166136261;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 16777619);
  }
  return h >>> 0;
}

function unexpected(response: PrepResponse, wanted: string): ShoalError {
  return new ShoalError(ErrorCode.INTERNAL, `prep thread answered ${response.type}, expected ${wanted}`);
}

export class PrepPool {
  readonly #threads: ThreadClient<PrepRequest, PrepResponse>[] = [];
  readonly #size: number;
  readonly #imagePolicy: ImagePolicy;
  readonly #interactiveThread: boolean;
  #closed = false;

  constructor(options: PrepPoolOptions = {}) {
    this.#size = Math.max(1, Math.min(options.threads ?? 1, availableParallelism() * 2));
    this.#imagePolicy = options.imagePolicy ?? ImagePolicy.parse({});
    this.#interactiveThread = options.interactiveThread ?? true;
  }

  /**
   * The thread for a model folder. Interactive work has a thread of its own (the last slot), so a
   * search query is never tokenized behind a chunk of a bulk job (unless `interactiveThread` is off).
   */
  #thread(key: string, requested: PrepLane = 'bulk'): ThreadClient<PrepRequest, PrepResponse> {
    if (this.#closed) throw new ShoalError(ErrorCode.UNAVAILABLE, 'prep pool is closed');
    const lane = this.#interactiveThread ? requested : 'bulk';
    const index = lane === 'interactive' ? this.#size : hash(key) % this.#size;
    let thread = this.#threads[index];
    if (thread === undefined || !thread.alive) {
      const name = lane === 'interactive' ? 'shoal-prep-interactive' : `shoal-prep-${index}`;
      const early = adoptEarlyThread('prep');
      const worker = early ?? spawnThread(siblingModule(import.meta.url, 'prep-thread'), { name, workerData: { imagePolicy: this.#imagePolicy } });
      thread = new ThreadClient<PrepRequest, PrepResponse>(worker, { name: lane === 'interactive' ? 'interactive prep thread' : `prep thread ${index}` });
      // A thread started early (early-threads.ts) has no image policy yet: requests are handled in
      // order, so it has this one before any other request reaches it.
      if (early !== null) thread.request({ type: 'configure', imagePolicy: this.#imagePolicy }).catch(() => undefined);
      this.#threads[index] = thread;
    }
    return thread;
  }

  /** Prep threads running now. */
  get threadCount(): number {
    return this.#threads.filter((thread) => thread?.alive === true).length;
  }

  async describe(id: string, dir: string, overrides: ProfileOverrides): Promise<ModelProfile> {
    const response = await this.#thread(dir).request({ type: 'describe', id, dir, overrides });
    if (response.type !== 'described') throw unexpected(response, 'described');
    return response.profile;
  }

  async prepare(profile: ModelProfile, request: PrepareRequest, lane: PrepLane = 'bulk'): Promise<Prepared[]> {
    const response = await this.#thread(profile.dir, lane).request({ type: 'prepare', profile, request });
    if (response.type !== 'prepared') throw unexpected(response, 'prepared');
    return response.items;
  }

  async tokenize(profile: ModelProfile, request: PrepareRequest): Promise<TokenizedOutput[]> {
    const response = await this.#thread(profile.dir).request({ type: 'tokenize', profile, request });
    if (response.type !== 'tokenized') throw unexpected(response, 'tokenized');
    return response.items;
  }

  async forget(dir: string): Promise<void> {
    const bulk = this.#threads[hash(dir) % this.#size];
    const interactive = this.#threads[this.#size];
    await Promise.all([bulk, interactive].map(async (thread) => {
      if (thread?.alive === true) await thread.request({ type: 'forget', dir });
    }));
  }


  async close(): Promise<void> {
    this.#closed = true;
    await Promise.all(this.#threads.map((thread) => thread.close()));
    this.#threads.length = 0;
  }
}
