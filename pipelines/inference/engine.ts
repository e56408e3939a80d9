import { z } from 'zod';
import type { CallOptions, Engine } from '../../adapters/protocol/engine.js';
import { ErrorCode, ShoalError } from '../../adapters/protocol/errors.js';
import {
  EncodeRequest,
  ExtractRequest,
  ScoreRequest,
  TokenizeRequest,
  type OutputType,
  type Role,
} from '../../adapters/protocol/requests.js';
import type {
  EncodedItem,
  EncodeResult,
  ExtractedItem,
  ExtractResult,
  ScoredItem,
  ScoreResult,
  TokenizeResult,
} from '../../adapters/protocol/results.js';
import { parseWith } from '../../adapters/protocol/validate.js';
import { RuntimeOptions } from '../../adapters/runtime/ort-session.js';
import { SourceOptions, sourceOptionsFromEnv } from '../../adapters/sources/resolve.js';
import type { DownloadProgress } from '../../adapters/sources/hub-download.js';
import { preparedCost, type ItemOutput, type Prepared, type PrepItem, type RunOptions, type Task } from '../../adapters/models/family.js';
import { PrepPool } from '../../adapters/models/prep-pool.js';
import type { ModelProfile } from '../../adapters/models/profile.js';
import { getFamily } from '../../adapters/models/registry.js';
import type { CompareTo } from '../../adapters/models/thread-messages.js';
import { packBatches } from './batcher.js';
import { EMPTY_CATALOG, type Catalog } from './catalog.js';
import { resolveProfile } from './model-loader.js';
import { ModelPool, type LoadedModel } from './pool.js';
import { promptFor, type PromptChoice } from './prompts.js';

/**
 * The in-process Engine: encode / score / extract / tokenize on any model the catalog or the
 * sources can resolve. Requests are validated, prepared in a prep thread, packed into
 * length-sorted token-budget batches and run in the model's own thread.
 */

export const EngineOptions = z.strictObject({
  sources: SourceOptions.optional(),
  runtime: RuntimeOptions.optional(),
  /** Prep (tokenization) threads. */
  prepThreads: z.number().int().min(1).max(64).default(1),
  /** Padded tokens per batch (longest × items). */
  maxBatchTokens: z.number().int().min(1).default(16_384),
  maxBatchItems: z.number().int().min(1).default(256),
  /** Serve models that are not in the catalog, by hub id or local path. */
  allowUnlisted: z.boolean().default(true),
});
export type EngineOptionsInput = z.input<typeof EngineOptions> & {
  catalog?: Catalog;
  /** Called while a model is downloaded from the hub (the CLI draws a progress bar with it). */
  onDownloadProgress?: (event: DownloadProgress) => void;
};

/** Items per prep message: keeps each prep step short so other requests interleave. */
const PREP_CHUNK = 1024;

function throwIfAborted(signal: AbortSignal | undefined): void {
  if (signal?.aborted === true) throw new ShoalError(ErrorCode.CANCELLED, 'the request was cancelled');
}

function withId<T extends object>(target: T, id: string | number | undefined): T {
  if (id !== undefined) Object.assign(target, { id });
  return target;
}

export class InferenceEngine implements Engine {
  readonly #options: z.output<typeof EngineOptions>;
  readonly #prep: PrepPool;
  readonly #pool: ModelPool;
  /** Detected profiles by model name: tokenize and inspect need no ONNX session. */
  readonly #profiles = new Map<string, Promise<ModelProfile>>();
  readonly #resolve: (name: string) => Promise<ModelProfile>;
  #closed = false;

  constructor(input: EngineOptionsInput = {}) {
    const { catalog, onDownloadProgress, ...rest } = input;
    const options = parseWith(EngineOptions, rest, 'engine options', ErrorCode.CONFIG_INVALID);
    this.#options = options;
    const sources = options.sources ?? SourceOptions.parse(sourceOptionsFromEnv());
    this.#prep = new PrepPool({ threads: options.prepThreads });
    const runtime = options.runtime ?? RuntimeOptions.parse({});
    this.#resolve = (name) =>
      resolveProfile(name, {
        catalog: catalog ?? EMPTY_CATALOG,
        sources,
        prep: this.#prep,
        allowUnlisted: options.allowUnlisted,
        onDownloadProgress,
      });
    this.#pool = new ModelPool({ runtime, resolve: (name) => this.profile(name) });
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

  /** The detected profile of a model (loads it). */
  async inspect(model: string): Promise<{ profile: ModelProfile; info: LoadedModel['worker']['info']; loadMs: number }> {
    const loaded = await this.#acquire(model);
    return { profile: loaded.profile, info: loaded.worker.info, loadMs: loaded.loadMs };
  }

  async #acquire(model: string): Promise<LoadedModel> {
    if (this.#closed) throw new ShoalError(ErrorCode.UNAVAILABLE, 'the engine is closed');
    return this.#pool.acquire(model);
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

  async #prepare(profile: ModelProfile, task: Task, items: PrepItem[], maxLength: number, labels?: string[]): Promise<Prepared[]> {
    const out: Prepared[] = [];
    for (let start = 0; start < items.length; start += PREP_CHUNK) {
      const chunk = items.slice(start, start + PREP_CHUNK);
      const request = labels === undefined ? { task, items: chunk, maxLength } : { task, items: chunk, maxLength, labels };
      out.push(...(await this.#prep.prepare(profile, request)));
    }
    return out;
  }

  /** Runs prepared items in length-sorted token-budget batches; outputs come back in input order. */
  async #run(model: LoadedModel, prepared: Prepared[], options: RunOptions, signal?: AbortSignal, compareTo?: CompareTo): Promise<ItemOutput[]> {
    const batches = packBatches(prepared.map(preparedCost), {
      maxBatchTokens: this.#options.maxBatchTokens,
      maxBatchItems: this.#options.maxBatchItems,
    });
    const outputs = new Array<ItemOutput>(prepared.length);
    for (const batch of batches) {
      throwIfAborted(signal);
      const items = batch.indices.map((i) => prepared[i]).filter((p): p is Prepared => p !== undefined);
      const result = await model.worker.run(items, options, compareTo);
      batch.indices.forEach((index, k) => {
        const output = result.outputs[k];
        if (output === undefined) throw new ShoalError(ErrorCode.INTERNAL, 'model thread returned fewer outputs than items');
        outputs[index] = output;
      });
    }
    model.lastUsed = Date.now();
    return outputs;
  }

  #prepItems(profile: ModelProfile, items: { text: string; role?: Role | undefined }[], defaultRole: Role | undefined, choice: PromptChoice): PrepItem[] {
    const prompts = new Map<Role | 'none', string>();
    return items.map((item) => {
      const role = item.role ?? defaultRole;
      const key = role ?? 'none';
      let prompt = prompts.get(key);
      if (prompt === undefined) {
        prompt = promptFor(profile, role, choice);
        prompts.set(key, prompt);
      }
      return prompt === '' ? { text: item.text, role: role ?? 'document' } : { text: prompt + item.text, role: role ?? 'document', prompt };
    });
  }

  async encode(input: EncodeRequest, call: CallOptions = {}): Promise<EncodeResult> {
    const request = parseWith(EncodeRequest, input, 'encode request');
    const model = await this.#acquire(request.model);
    const { profile } = model;
    const family = getFamily(profile.family);
    const outputs: OutputType[] = request.output_types ?? [...family.capabilities.defaultOutputs];
    const unsupported = outputs.filter((o) => !family.capabilities.encode.includes(o));
    if (unsupported.length > 0 || family.capabilities.encode.length === 0) {
      throw new ShoalError(
        ErrorCode.UNSUPPORTED_OPERATION,
        `model ${request.model} (${profile.family}) cannot encode ${unsupported.join(', ') || 'anything'}; it supports ${family.capabilities.encode.join(', ') || 'no encode outputs'}`,
      );
    }
    const maxLength = this.#maxLength(profile, request.max_length);
    const items = this.#prepItems(profile, request.items, request.role, {
      prompt: request.prompt,
      promptText: request.prompt_text,
      instruction: request.instruction,
    });
    const prepared = await this.#prepare(profile, 'encode', items, maxLength);
    const options: RunOptions = request.normalize === undefined ? { outputs } : { outputs, normalize: request.normalize };
    const results = await this.#run(model, prepared, options, call.signal);
    let tokens = 0;
    const encoded = results.map((output, index): EncodedItem => {
      const prep = prepared[index];
      tokens += prep === undefined ? 0 : preparedCost(prep);
      const item: EncodedItem = withId({ index }, request.items[index]?.id);
      if (outputs.includes('dense') && output.dense !== undefined) item.dense = output.dense;
      if (outputs.includes('sparse') && output.sparse !== undefined) item.sparse = output.sparse;
      if (outputs.includes('multivector') && output.multivector !== undefined) item.multivector = output.multivector;
      if (prep?.truncated === true) item.truncated = true;
      return item;
    });
    return { model: request.model, items: encoded, usage: { items: encoded.length, tokens } };
  }

  async score(input: ScoreRequest, call: CallOptions = {}): Promise<ScoreResult> {
    const request = parseWith(ScoreRequest, input, 'score request');
    const model = await this.#acquire(request.model);
    const { profile } = model;
    const family = getFamily(profile.family);
    const maxLength = this.#maxLength(profile, request.max_length);
    let outputs: ItemOutput[];
    let prepared: Prepared[];
    if (family.capabilities.score === 'pairs') {
      const items: PrepItem[] = request.items.map((item) => ({ text: request.query.text, pair: item.text, role: 'document' }));
      prepared = await this.#prepare(profile, 'score', items, maxLength);
      outputs = await this.#run(model, prepared, { outputs: [] }, call.signal);
    } else if (family.capabilities.score === 'embeddings') {
      const encodeAs = family.capabilities.defaultOutputs;
      const choice: PromptChoice = { prompt: request.prompt, instruction: request.instruction };
      const queryItems = this.#prepItems(profile, [{ text: request.query.text }], 'query', choice);
      const queryPrepared = await this.#prepare(profile, 'encode', queryItems, maxLength);
      const [query] = await this.#run(model, queryPrepared, { outputs: [...encodeAs] }, call.signal);
      if (query === undefined) throw new ShoalError(ErrorCode.INTERNAL, 'query encoding missing');
      const reference: CompareTo = {};
      if (query.dense !== undefined) reference.dense = query.dense;
      if (query.sparse !== undefined) reference.sparse = query.sparse;
      if (query.multivector !== undefined) reference.multivector = query.multivector;
      const documents = this.#prepItems(profile, request.items, 'document', {});
      prepared = await this.#prepare(profile, 'encode', documents, maxLength);
      outputs = await this.#run(model, prepared, { outputs: [...encodeAs] }, call.signal, reference);
      prepared = [...queryPrepared, ...prepared];
    } else {
      throw new ShoalError(ErrorCode.UNSUPPORTED_OPERATION, `model ${request.model} (${profile.family}) cannot score`);
    }
    const scores = outputs.map((output, index): ScoredItem => withId({ index, score: output.score ?? Number.NaN }, request.items[index]?.id));
    scores.sort((a, b) => b.score - a.score || a.index - b.index);
    const limited = request.top_k === undefined ? scores : scores.slice(0, request.top_k);
    const tokens = prepared.reduce((sum, p) => sum + preparedCost(p), 0);
    return { model: request.model, scores: limited, usage: { items: request.items.length, tokens } };
  }

  async extract(input: ExtractRequest, call: CallOptions = {}): Promise<ExtractResult> {
    const request = parseWith(ExtractRequest, input, 'extract request');
    const model = await this.#acquire(request.model);
    const { profile } = model;
    const family = getFamily(profile.family);
    if (!family.capabilities.extract) {
      throw new ShoalError(ErrorCode.UNSUPPORTED_OPERATION, `model ${request.model} (${profile.family}) cannot extract; use encode or score`);
    }
    const maxLength = this.#maxLength(profile, request.max_length);
    const items: PrepItem[] = request.items.map((item) => ({ text: item.text, role: 'document' }));
    const prepared = await this.#prepare(profile, 'extract', items, maxLength, request.labels);
    const options: RunOptions = { outputs: [] };
    if (request.threshold !== undefined) options.threshold = request.threshold;
    if (request.aggregation !== undefined) options.aggregation = request.aggregation;
    if (request.top_k !== undefined) options.topK = request.top_k;
    const outputs = await this.#run(model, prepared, options, call.signal);
    const extracted = outputs.map((output, index): ExtractedItem => {
      const item: ExtractedItem = withId({ index }, request.items[index]?.id);
      if (output.entities !== undefined) item.entities = output.entities;
      if (output.labels !== undefined) item.labels = output.labels;
      if (output.text !== undefined) item.text = output.text;
      return item;
    });
    const tokens = prepared.reduce((sum, p) => sum + preparedCost(p), 0);
    return { model: request.model, items: extracted, usage: { items: extracted.length, tokens } };
  }

  async tokenize(input: TokenizeRequest, call: CallOptions = {}): Promise<TokenizeResult> {
    const request = parseWith(TokenizeRequest, input, 'tokenize request');
    throwIfAborted(call.signal);
    const profile = await this.profile(request.model);
    const maxLength = this.#maxLength(profile, request.max_length);
    const items = this.#prepItems(profile, request.items, request.role, {
      prompt: request.prompt,
      promptText: request.prompt_text,
      instruction: request.instruction,
    }).map((item, index): PrepItem => {
      // The prompt goes on the first segment only; the pair segment is tokenized as given.
      const pair = request.items[index]?.pair;
      return pair === undefined ? item : { ...item, pair };
    });
    const tokenized = await this.#prep.tokenize(profile, { task: 'tokenize', items, maxLength });
    return {
      model: request.model,
      items: tokenized.map((t, index) => withId({ index, ids: t.ids, tokens: t.tokens, truncated: t.truncated, length: t.length }, request.items[index]?.id)),
    };
  }

  async loadedModels(): Promise<LoadedModel[]> {
    return this.#pool.list();
  }

  async unload(model: string): Promise<boolean> {
    return this.#pool.unload(model);
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.#pool.close();
    await this.#prep.close();
  }
}
