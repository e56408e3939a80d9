import { setMaxListeners } from 'node:events';
import type { Classification, ClassifyItem, DecidedBy } from '../../adapters/protocol/classify.js';
import type { CallOptions, Engine } from '../../adapters/protocol/engine.js';
import { ErrorCode, ShoalError } from '../../adapters/protocol/errors.js';
import type { Item } from '../../adapters/protocol/requests.js';
import type { Taxonomy } from '../../adapters/taxonomy/index.js';
import { categoryIndex, categoryText, type CategoryIndex, type CategoryProgress, type CategorySource } from './category-index.js';
import { hierarchyChoice, type Scored } from './hierarchy.js';
import { normalizeRow, rowDot } from './matrix.js';
import { resolveClassifierOptions, type ClassifierOptions, type ClassifierOptionsInput } from './options.js';
import { SearchThread } from './search-pool.js';

/**
 * Taxonomy classification through the Engine interface (in process, or over NATS): products are
 * embedded, the nearest categories retrieved from the packed category matrix (search thread),
 * optionally re-weighted by image similarity (CLIP-style model), rescored by a cross-encoder and
 * voted top-down for a consistent path; a score below the threshold marks needs_review.
 */

/** Scores in outputs are rounded to this many decimals (float noise never shows). */
const SCORE_DECIMALS = 6;

function round(score: number): number {
  const factor = 10 ** SCORE_DECIMALS;
  return Math.round(score * factor) / factor;
}

export interface CategoryStats {
  /** True when this classifier embedded the categories (false: cache). */
  built: boolean;
  /** Where the (text) matrix came from: embedded here, the local cache folder or the shared store. */
  source: CategorySource;
  seconds: number;
  categories: number;
  file: string | null;
}

/** What the category matrices of a classifier are built from, as one comparable key. */
export function matrixOptions(options: ClassifierOptions): string {
  return JSON.stringify([options.model, options.imageModel, options.categoryTemplate, options.categoryRole, options.maxLength ?? null, options.cacheDir]);
}

export class TaxonomyClassifier {
  readonly taxonomy: Taxonomy;
  readonly options: ClassifierOptions;
  readonly #engine: Engine;
  readonly #text: CategoryIndex;
  readonly #image: CategoryIndex | null;
  readonly #search = new SearchThread();

  private constructor(engine: Engine, taxonomy: Taxonomy, options: ClassifierOptions, text: CategoryIndex, image: CategoryIndex | null) {
    this.#engine = engine;
    this.taxonomy = taxonomy;
    this.options = options;
    this.#text = text;
    this.#image = image;
  }

  /**
   * Builds (or loads from the cache) the category matrices; nothing else is started until the
   * first batch. `progress` is told how many categories are embedded when they are not cached (a
   * long wait with a real model).
   */
  static async open(engine: Engine, taxonomy: Taxonomy, input: ClassifierOptionsInput, call: CallOptions = {}, progress?: CategoryProgress): Promise<TaxonomyClassifier> {
    const options = resolveClassifierOptions(input);
    const embedding = { template: options.categoryTemplate, role: options.categoryRole, maxLength: options.maxLength };
    const cache = { dir: options.cacheDir, shared: options.sharedCategories };
    const text = await categoryIndex(engine, taxonomy, { ...embedding, model: options.model }, cache, call, progress);
    const image = options.imageModel === null ? null : await categoryIndex(engine, taxonomy, { ...embedding, model: options.imageModel }, cache, call, progress);
    return new TaxonomyClassifier(engine, taxonomy, options, text, image);
  }

  /** How the category matrix was obtained (cache or embedding), for progress lines and tests. */
  get categoryStats(): CategoryStats {
    return { built: this.#text.built || (this.#image?.built ?? false), source: this.#text.source, seconds: this.#text.seconds + (this.#image?.seconds ?? 0), categories: this.#text.matrix.rows, file: this.#text.file };
  }

  async #encode(model: string, dim: number, items: readonly Item[], options: ClassifierOptions, call: CallOptions): Promise<Float32Array<ArrayBuffer>> {
    const result = await this.#engine.encode(
      {
        model,
        items: [...items],
        output_types: ['dense'],
        role: options.productRole,
        ...(options.maxLength === undefined ? {} : { max_length: options.maxLength }),
        priority: 'bulk',
      },
      call,
    );
    const packed = new Float32Array(items.length * dim);
    const seen = new Uint8Array(items.length);
    for (const item of result.items) {
      if (item.dense === undefined || item.dense.length !== dim) throw new ShoalError(ErrorCode.INFERENCE_FAILED, `model ${model} returned no ${dim}-dimensional vector for item ${item.index}`);
      packed.set(item.dense, item.index * dim);
      normalizeRow(packed, item.index * dim, dim);
      seen[item.index] = 1;
    }
    if (seen.includes(0)) throw new ShoalError(ErrorCode.INFERENCE_FAILED, `model ${model} returned fewer vectors than items`);
    return packed;
  }

  /** Image similarity of each product's candidates, fused into their scores (products without an image keep theirs). */
  async #fuseImages(items: readonly ClassifyItem[], candidates: Scored[][], options: ClassifierOptions, call: CallOptions): Promise<void> {
    const image = this.#image;
    if (image === null) return;
    const withImage = items.flatMap((item, at) => (item.image === undefined ? [] : [{ at, image: item.image }]));
    if (withImage.length === 0) return;
    const vectors = await this.#encode(options.imageModel ?? options.model, image.matrix.dim, withImage.map(({ image: source }) => ({ image: source })), options, call);
    const weight = options.imageWeight;
    withImage.forEach(({ at }, row) => {
      const list = candidates[at] ?? [];
      for (const candidate of list) candidate.score = (1 - weight) * candidate.score + weight * rowDot(image.matrix, candidate.index, vectors, row * image.matrix.dim);
      list.sort((a, b) => b.score - a.score || a.index - b.index);
    });
  }

  async #rerank(item: ClassifyItem, candidates: Scored[], options: ClassifierOptions, call: CallOptions): Promise<Scored[]> {
    const model = options.rerankModel;
    if (model === null || candidates.length === 0) return candidates;
    const top = candidates.slice(0, options.rerankTop);
    const result = await this.#engine.score(
      {
        model,
        query: item.text,
        items: top.map((candidate) => categoryText(options.categoryTemplate, this.taxonomy.categories[candidate.index] ?? { id: '', path: [], pathText: '' })),
        ...(options.maxLength === undefined ? {} : { max_length: options.maxLength }),
        priority: 'bulk',
      },
      call,
    );
    return result.scores
      .map((scored) => ({ index: top[scored.index]?.index ?? -1, score: scored.score }))
      .filter((scored) => scored.index >= 0)
      .sort((a, b) => b.score - a.score || a.index - b.index);
  }

  /**
   * One score call per product, all at once. Each call listens for the abort of the signal it is
   * given, so they get a signal of their own, linked once to the caller's: hundreds of listeners
   * on the caller's signal made Node warn of a leak (MaxListenersExceededWarning).
   */
  async #rerankAll(items: readonly ClassifyItem[], candidates: Scored[][], options: ClassifierOptions, call: CallOptions): Promise<Scored[][]> {
    const signal = call.signal === undefined ? undefined : AbortSignal.any([call.signal]);
    if (signal !== undefined) setMaxListeners(items.length + 10, signal);
    return Promise.all(items.map((item, at) => this.#rerank(item, candidates[at] ?? [], options, signal === undefined ? {} : { signal })));
  }

  #decide(id: Classification['id'], candidates: readonly Scored[], decidedBy: DecidedBy, options: ClassifierOptions): Classification {
    const first = candidates[0];
    if (first === undefined) throw new ShoalError(ErrorCode.INTERNAL, `no category candidates for product ${String(id)}`);
    const chosen = options.hierarchy ? hierarchyChoice(this.taxonomy, candidates) : first.index;
    const chosenScore = candidates.find((candidate) => candidate.index === chosen)?.score ?? first.score;
    const category = this.taxonomy.categories[chosen];
    if (category === undefined) throw new ShoalError(ErrorCode.INTERNAL, `category ${chosen} is not in the taxonomy`);
    const alternatives = candidates
      .filter((candidate) => candidate.index !== chosen)
      .slice(0, options.topK - 1)
      .map((candidate) => {
        const alternative = this.taxonomy.categories[candidate.index];
        return { id: alternative?.id ?? '', path: alternative?.pathText ?? '', score: round(candidate.score) };
      });
    const score = round(chosenScore);
    return { id, category: { id: category.id, path: category.pathText }, score, alternatives, decided_by: decidedBy, needs_review: score < options.threshold };
  }

  /**
   * One classification per item, in item order; `id` is the item's id or its 0-based position.
   * `options` may change how candidates are picked and decided (top-k, candidates, rerank,
   * hierarchy, threshold, image weight, product role), not what the category matrices were
   * built from (model, image model, template, category role, max length): the caller keys
   * classifiers by those (see `matrixOptions`).
   */
  async classify(items: readonly ClassifyItem[], call: CallOptions = {}, options: ClassifierOptions = this.options): Promise<Classification[]> {
    if (items.length === 0) return [];
    if (matrixOptions(options) !== matrixOptions(this.options)) throw new ShoalError(ErrorCode.INTERNAL, 'classify options name other category matrices than this classifier holds');
    const { matrix, key } = this.#text;
    const queries = await this.#encode(options.model, matrix.dim, items.map((item) => ({ text: item.text })), options, call);
    await this.#search.load(key, matrix);
    const k = Math.min(options.candidates, matrix.rows);
    const found = await this.#search.search(key, queries, items.length, k);
    const candidates: Scored[][] = items.map((_, at) => {
      const list: Scored[] = [];
      for (let i = 0; i < k; i++) {
        const index = found.indices[at * k + i] ?? -1;
        if (index >= 0) list.push({ index, score: found.scores[at * k + i] ?? 0 });
      }
      return list;
    });
    await this.#fuseImages(items, candidates, options, call);
    const reranked = options.rerankModel === null ? candidates : await this.#rerankAll(items, candidates, options, call);
    const decidedBy: DecidedBy = options.rerankModel === null ? 'retrieve' : 'rerank';
    return items.map((item, at) => this.#decide(item.id ?? at, reranked[at] ?? [], decidedBy, options));
  }

  /** Stops the search thread. The engine stays the caller's. */
  async close(): Promise<void> {
    await this.#search.close();
  }
}
