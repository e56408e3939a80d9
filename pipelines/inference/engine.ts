import type { CallOptions, Engine } from '../../adapters/protocol/engine.js';
import { ErrorCode, ShoalError } from '../../adapters/protocol/errors.js';
import type { Lifecycle } from '../../adapters/protocol/lifecycle.js';
import {
  EncodeRequest,
  ExtractRequest,
  ScoreRequest,
  TokenizeRequest,
  type OutputType,
  isImageItem,
  type Priority,
} from '../../adapters/protocol/requests.js';
import type {
  EncodeResult,
  ExtractedItem,
  ExtractResult,
  ScoredItem,
  ScoreResult,
  TokenizeResult,
  TypedEncodedItem,
  TypedEncodeResult,
} from '../../adapters/protocol/results.js';
import { toCodePointOffsets } from '../../adapters/protocol/entity-offsets.js';
import { parseWith } from '../../adapters/protocol/validate.js';
import {
  preparedCost,
  type ItemOutput,
  type PrepItem,
  type RunnerInfo,
  type RunOptions,
} from '../../adapters/models/family.js';
import { ModelThreads, type ModelWorker } from '../../adapters/model-threads/model-worker.js';
import { PrepPool } from '../../adapters/model-threads/prep-pool.js';
import type { ModelProfile } from '../../adapters/models/profile.js';
import { getFamily } from '../../adapters/models/registry.js';
import type { CompareTo } from '../../adapters/model-threads/thread-messages.js';
import { tunedBudget } from './batch-tuning.js';
import { EMPTY_CATALOG } from './catalog.js';
import { denseBytesAtLeast, shapeDense, toWireResult, type DenseShape } from './dense-output.js';
import { resolveEngineOptions, type EngineOptionsInput, type ResolvedEngineOptions } from './engine-options.js';
import { predictModelBytes } from './memory.js';
import { resolveProfile } from './model-loader.js';
import type { ModelLease } from './loaded-model.js';
import { ModelPool } from './pool.js';
import type { PoolSnapshot } from './pool-options.js';
import { type PromptChoice } from './prompts.js';
import { Scheduler } from './scheduler.js';
import { ChunkedRunner, throwIfAborted } from './chunked-run.js';
import { RequestItems } from './request-items.js';

export { EngineOptions } from './engine-options.js';
export type { EngineOptionsInput } from './engine-options.js';

/**
 * The in-process Engine: encode / score / extract / tokenize on any model the catalog or the
 * sources can resolve. A request is validated, its items made ready for the model
 * (request-items.ts), then tokenized and run chunk by chunk (chunked-run.ts); the scheduler packs
 * items of all requests into token-budget batches per model and lane. The model stays resident
 * (leased from the pool) until the request finishes. This file holds what each operation adds:
 * which outputs, which prompts, and the shape of its result.
 */

/** The int8 default budget for a model whose main graph runs int8, unless a budget was configured (engine or catalog). */
function int8Budget(worker: ModelWorker, budget: number | null): number | null {
  if (budget === null || typeof worker.profile.options.maxBatchTokens === 'number') return null;
  const precision = worker.info.precision ?? {};
  const graphs = Object.values(precision);
  return graphs.length > 0 && graphs.every((p) => p.effective === 'int8') ? budget : null;
}

function withId<T extends object>(target: T, id: string | number | undefined): T {
  if (id !== undefined) Object.assign(target, { id });
  return target;
}

export interface InspectResult {
  profile: ModelProfile;
  info: RunnerInfo;
  loadMs: number;
  predictedBytes: number;
  measuredBytes: number;
}

export class InferenceEngine implements Engine, Lifecycle {
  readonly #options: ResolvedEngineOptions;
  readonly #prep: PrepPool;
  readonly #pool: ModelPool;
  readonly #scheduler: Scheduler;
  readonly #threads: ModelThreads;
  readonly #items: RequestItems;
  readonly #runner: ChunkedRunner;
  /** Detected profiles by model name: tokenize needs no ONNX session. */
  readonly #profiles = new Map<string, Promise<ModelProfile>>();
  readonly #resolve: (name: string) => Promise<ModelProfile>;
  #closed = false;

  constructor(input: EngineOptionsInput = {}) {
    const { catalog, onDownloadProgress, hooks, ...rest } = input;
    const options = resolveEngineOptions(rest);
    this.#options = options;
    this.#prep = new PrepPool({ threads: options.prepThreads, imagePolicy: options.images, interactiveThread: options.interactiveSessions });
    this.#resolve = (name) =>
      resolveProfile(name, {
        catalog: catalog ?? EMPTY_CATALOG,
        sources: options.sources,
        prep: this.#prep,
        allowUnlisted: options.allowUnlisted,
        onDownloadProgress,
      });
    this.#scheduler = new Scheduler({
      maxBatchTokens: options.maxBatchTokens,
      maxBatchItems: options.maxBatchItems,
      maxWaitMs: options.maxWaitMs,
      maxConcurrentBatches: options.maxConcurrentBatches,
      maxQueuedItems: options.maxQueuedItems,
      targetBatchMs: options.targetBatchMs,
      hooks: hooks?.scheduler,
    });
    const providers = options.runtime.providers;
    const poolHooks = hooks?.pool;
    this.#threads = new ModelThreads(options.spareThreads, options.runtime.returnFreedMemory);
    this.#pool = new ModelPool({
      threads: this.#threads,
      reuseThreads: options.reuseModelThreads,
      ...(options.autoBatchTokens
        ? { tune: (worker: ModelWorker) => tunedBudget(worker, options.runtime) }
        : { tune: async (worker: ModelWorker) => int8Budget(worker, options.int8BatchTokens) }),
      resolve: (name) => this.profile(name),
      runtime: options.runtime,
      interactiveRuntime: options.interactiveRuntime,
      budgetBytes: options.memoryBudgetBytes,
      predict: (profile) => predictModelBytes(profile, { maxBatchTokens: this.#batchTokens(profile), providers }),
      predictInteractive: (profile) => predictModelBytes(profile, { maxBatchTokens: Math.min(512, this.#batchTokens(profile)), providers }),
      idleEvictMs: options.idleEvictSeconds === null ? null : options.idleEvictSeconds * 1000,
      admissionTimeoutMs: options.admissionTimeoutMs,
      hooks: {
        ...poolHooks,
        onEvict: (event) => {
          this.#scheduler.forget(event.name);
          poolHooks?.onEvict?.(event);
        },
      },
    });
    this.#items = new RequestItems(options.images);
    this.#runner = new ChunkedRunner({ prep: this.#prep, scheduler: this.#scheduler, pool: this.#pool, interactiveSessions: options.interactiveSessions });
  }

  /** Starts serving: loads and pins the configured `preload` models (other models load at first use). */
  async start(): Promise<void> {
    for (const name of this.#options.preload) await this.#pool.preload(name, true);
  }

  /** Loads a model ahead of traffic; `pin` keeps it resident whatever the memory pressure. */
  async preload(model: string, pin = false): Promise<void> {
    await this.#pool.preload(model, pin);
  }

  /** The detected profile of a model, without loading its ONNX session. */
  profile(model: string): Promise<ModelProfile> {
    if (this.#closed) return Promise.reject(new ShoalError(ErrorCode.UNAVAILABLE, 'the engine is closed'));
    let known = this.#profiles.get(model);
    if (known === undefined) {
      known = this.#resolve(model);
      this.#profiles.set(model, known);
      known.catch(() => {
        if (this.#profiles.get(model) === known) this.#profiles.delete(model);
      });
    }
    return known;
  }

  /** Loads a model and describes it: detected profile, runtime facts, memory. */
  async inspect(model: string): Promise<InspectResult> {
    return this.#withModel(model, async (lease) => ({
      profile: lease.model.profile,
      info: lease.model.worker.info,
      loadMs: lease.model.loadMs,
      predictedBytes: lease.model.predictedBytes,
      measuredBytes: lease.model.measuredBytes,
    }));
  }

  /** Resident models, their memory and use. */
  models(): PoolSnapshot {
    return this.#pool.snapshot();
  }

  get scheduler(): { queuedItems: number; queuedByLane: Readonly<Record<Priority, number>>; runningBatches: number; hasCapacity(items: number): boolean } {
    return this.#scheduler;
  }

  #batchTokens(profile: ModelProfile): number {
    const override = profile.options.maxBatchTokens;
    return typeof override === 'number' && override > 0 ? override : this.#options.maxBatchTokens;
  }

  async #withModel<T>(model: string, work: (lease: ModelLease) => Promise<T>): Promise<T> {
    if (this.#closed) throw new ShoalError(ErrorCode.UNAVAILABLE, 'the engine is closed');
    const lease = await this.#pool.acquire(model);
    try {
      return await work(lease);
    } finally {
      lease.release();
    }
  }

  #lane(priority: Priority | undefined, items: number): Priority {
    return priority ?? (items <= this.#options.interactiveMaxItems ? 'interactive' : 'bulk');
  }

  #maxLength(profile: ModelProfile, requested: number | undefined): number {
    if (requested === undefined) return profile.maxLength;
    if (profile.hardMaxLength !== null && requested > profile.hardMaxLength) {
      throw new ShoalError(
        ErrorCode.INVALID_INPUT,
        `max_length ${requested} exceeds what ${profile.id} can read (${profile.hardMaxLength} tokens)`,
      );
    }
    return requested;
  }

  async encode(input: EncodeRequest, call: CallOptions = {}): Promise<EncodeResult> {
    return toWireResult(await this.encodeTyped(input, call));
  }

  /**
   * `encode` with dense vectors left as typed arrays (Float32Array for float32): the ingest encode
   * stage (pipelines/documents/stages/batched-encode.ts) takes them as they are, skipping a
   * number[] copy of every vector on the way to the store.
   */
  async encodeTyped(input: EncodeRequest, call: CallOptions = {}): Promise<TypedEncodeResult> {
    const request = parseWith(EncodeRequest, input, 'encode request');
    const shape = { dtype: request.dtype ?? 'float32', dimensions: request.dimensions };
    return this.#withModel(request.model, async (lease) => {
      const { profile } = lease.model;
      const family = getFamily(profile.family);
      const outputs: OutputType[] = request.output_types ?? [...family.capabilities.defaultOutputs];
      const unsupported = outputs.filter((o) => !family.capabilities.encode.includes(o));
      if (unsupported.length > 0 || family.capabilities.encode.length === 0) {
        throw new ShoalError(
          ErrorCode.UNSUPPORTED_OPERATION,
          `model ${request.model} (${profile.family}) cannot encode ${unsupported.join(', ') || 'anything'}; it supports ${family.capabilities.encode.join(', ') || 'no encode outputs'}`,
        );
      }
      this.#checkResultSize(request.items.length, outputs, shape, lease.model.worker.info.dimension, call.maxResultBytes);
      const items = await this.#items.prepare(profile, request.items, request.role, {
        prompt: request.prompt,
        promptText: request.prompt_text,
        instruction: request.instruction,
      });
      const options: RunOptions = request.normalize === undefined ? { outputs } : { outputs, normalize: request.normalize };
      const { outputs: results, prepared } = await this.#runner.run(lease, items, {
        lane: this.#lane(request.priority, items.length),
        task: 'encode',
        maxLength: this.#maxLength(profile, request.max_length),
        options,
        signal: call.signal,
      });
      let tokens = 0;
      const encoded = results.map((output, index): TypedEncodedItem => {
        const prep = prepared[index];
        tokens += prep === undefined ? 0 : preparedCost(prep);
        const item: TypedEncodedItem = withId({ index }, request.items[index]?.id);
        if (outputs.includes('dense') && output.dense !== undefined) item.dense = shapeDense(output.dense, shape);
        if (outputs.includes('sparse') && output.sparse !== undefined) item.sparse = output.sparse;
        if (outputs.includes('multivector') && output.multivector !== undefined) item.multivector = output.multivector;
        if (prep !== undefined && prep.kind !== 'image' && prep.truncated) item.truncated = true;
        return item;
      });
      return { model: request.model, dtype: shape.dtype, items: encoded, usage: { items: encoded.length, tokens } };
    });
  }

  /** Refuses, before any work, dense results the caller could not carry (CallOptions.maxResultBytes). */
  #checkResultSize(items: number, outputs: readonly OutputType[], shape: DenseShape, dimension: number | null, limit: number | undefined): void {
    if (limit === undefined || dimension === null || !outputs.includes('dense')) return;
    const perItem = denseBytesAtLeast(1, dimension, shape);
    const bytes = items * perItem;
    if (bytes <= limit) return;
    const fits = Math.floor(limit / perItem);
    throw new ShoalError(
      ErrorCode.INPUT_TOO_LARGE,
      `${items} ${shape.dtype} vectors of ${Math.min(shape.dimensions ?? dimension, dimension)} dimensions take at least ${bytes} bytes, over the reply limit of ${limit}; send at most ${fits} items per request, a smaller dtype or dimensions, or submit a job`,
      { details: { items, bytesAtLeast: bytes, limit, itemsThatFit: fits } },
    );
  }

  async score(input: ScoreRequest, call: CallOptions = {}): Promise<ScoreResult> {
    const request = parseWith(ScoreRequest, input, 'score request');
    return this.#withModel(request.model, async (lease) => {
      const { profile } = lease.model;
      const family = getFamily(profile.family);
      const maxLength = this.#maxLength(profile, request.max_length);
      const lane = this.#lane(request.priority, request.items.length);
      let outputs: ItemOutput[];
      let tokens = 0;
      if (family.capabilities.score === 'pairs') {
        const query = request.query;
        if (!('text' in query)) throw new ShoalError(ErrorCode.UNSUPPORTED_OPERATION, `model ${request.model} (${profile.family}) scores text pairs, not images`);
        const items: PrepItem[] = request.items.map((item) => {
          if (isImageItem(item)) throw new ShoalError(ErrorCode.UNSUPPORTED_OPERATION, `model ${request.model} (${profile.family}) scores text pairs, not images`);
          const pair: PrepItem = { text: query.text, pair: item.text, role: 'document' };
          // Families whose prompt has a place for it (causal-LM rerankers) read it; cross-encoders have none.
          if (request.instruction !== undefined) pair.instruction = request.instruction;
          return pair;
        });
        const run = await this.#runner.run(lease, items, { lane, task: 'score', maxLength, options: { outputs: [] }, signal: call.signal });
        outputs = run.outputs;
        tokens = run.prepared.reduce((sum, p) => sum + preparedCost(p), 0);
      } else if (family.capabilities.score === 'embeddings') {
        const encodeAs = [...family.capabilities.defaultOutputs];
        const choice: PromptChoice = { prompt: request.prompt, instruction: request.instruction };
        const queryItems = await this.#items.prepare(profile, [request.query], 'query', choice, call.signal);
        const query = await this.#runner.run(lease, queryItems, { lane, task: 'encode', maxLength, options: { outputs: encodeAs }, signal: call.signal });
        const vector = query.outputs[0];
        if (vector === undefined) throw new ShoalError(ErrorCode.INTERNAL, 'query encoding missing');
        const reference: CompareTo = {};
        if (vector.dense !== undefined) reference.dense = vector.dense;
        if (vector.sparse !== undefined) reference.sparse = vector.sparse;
        if (vector.multivector !== undefined) reference.multivector = vector.multivector;
        const documents = await this.#items.prepare(profile, request.items, 'document', {}, call.signal);
        const run = await this.#runner.run(lease, documents, {
          lane,
          task: 'encode',
          maxLength,
          options: { outputs: encodeAs },
          compareTo: reference,
          signal: call.signal,
        });
        outputs = run.outputs;
        tokens = [...query.prepared, ...run.prepared].reduce((sum, p) => sum + preparedCost(p), 0);
      } else {
        throw new ShoalError(ErrorCode.UNSUPPORTED_OPERATION, `model ${request.model} (${profile.family}) cannot score`);
      }
      const scores = outputs.map((output, index): ScoredItem => withId({ index, score: output.score ?? Number.NaN }, request.items[index]?.id));
      scores.sort((a, b) => b.score - a.score || a.index - b.index);
      const limited = request.top_k === undefined ? scores : scores.slice(0, request.top_k);
      return { model: request.model, scores: limited, usage: { items: request.items.length, tokens } };
    });
  }

  async extract(input: ExtractRequest, call: CallOptions = {}): Promise<ExtractResult> {
    const request = parseWith(ExtractRequest, input, 'extract request');
    return this.#withModel(request.model, async (lease) => {
      const { profile } = lease.model;
      const family = getFamily(profile.family);
      if (!family.capabilities.extract) {
        throw new ShoalError(ErrorCode.UNSUPPORTED_OPERATION, `model ${request.model} (${profile.family}) cannot extract; use encode or score`);
      }
      const items = await this.#items.prepare(profile, request.items, 'document', null, call.signal);
      const options: RunOptions = { outputs: [] };
      if (request.threshold !== undefined) options.threshold = request.threshold;
      if (request.aggregation !== undefined) options.aggregation = request.aggregation;
      if (request.top_k !== undefined) options.topK = request.top_k;
      const { outputs, prepared } = await this.#runner.run(lease, items, {
        lane: this.#lane(request.priority, items.length),
        task: 'extract',
        maxLength: this.#maxLength(profile, request.max_length),
        options,
        labels: request.labels,
        signal: call.signal,
      });
      const extracted = outputs.map((output, index): ExtractedItem => {
        const item: ExtractedItem = withId({ index }, request.items[index]?.id);
        if (output.entities !== undefined) {
          const source = request.items[index];
          const text = source !== undefined && 'text' in source ? source.text : '';
          item.entities = request.offsets === 'codepoint' ? toCodePointOffsets(text, output.entities) : output.entities;
        }
        if (output.labels !== undefined) item.labels = output.labels;
        if (output.text !== undefined) item.text = output.text;
        if (output.lines !== undefined) item.lines = output.lines;
        return item;
      });
      const tokens = prepared.reduce((sum, p) => sum + preparedCost(p), 0);
      return { model: request.model, items: extracted, usage: { items: extracted.length, tokens } };
    });
  }

  async tokenize(input: TokenizeRequest, call: CallOptions = {}): Promise<TokenizeResult> {
    const request = parseWith(TokenizeRequest, input, 'tokenize request');
    throwIfAborted(call.signal);
    const profile = await this.profile(request.model);
    const maxLength = this.#maxLength(profile, request.max_length);
    // A causal-LM reranker writes the instruction into its pair prompt, as score does.
    const pairInstruction = getFamily(profile.family).capabilities.pairInstruction === true ? request.instruction : undefined;
    const items = (await this.#items.prepare(profile, request.items, request.role, {
      prompt: request.prompt,
      promptText: request.prompt_text,
      instruction: pairInstruction === undefined ? request.instruction : undefined,
    })).map((item, index): PrepItem => {
      // The prompt goes on the first segment only; the pair segment is tokenized as given.
      const pair = request.items[index]?.pair;
      const withPair = pair === undefined ? item : { ...item, pair };
      return pairInstruction === undefined ? withPair : { ...withPair, instruction: pairInstruction };
    });
    const tokenized = await this.#prep.tokenize(profile, { task: 'tokenize', items, maxLength });
    return {
      model: request.model,
      items: tokenized.map((t, index) => withId({ index, ids: t.ids, tokens: t.tokens, truncated: t.truncated, length: t.length }, request.items[index]?.id)),
    };
  }

  /** Unloads a model now (fails with UNAVAILABLE while requests use it). */
  async unload(model: string): Promise<boolean> {
    return this.#pool.unload(model);
  }

  /** Waits until nothing is queued or running. */
  async drain(): Promise<void> {
    await this.#scheduler.idle();
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#scheduler.close();
    // The prep threads hold no model: they stop while the models are released (a command's exit
    // waits for the slower of the two, not for both one after the other).
    const models = (async () => {
      await this.#pool.close();
      await this.#threads.close();
    })();
    await Promise.all([models, this.#prep.close()]);
  }
}
