import { randomBytes } from 'node:crypto';
import { ClassifyJobSpec } from '../../adapters/protocol/classify-jobs.js';
import type { Engine } from '../../adapters/protocol/engine.js';
import { parseWith } from '../../adapters/protocol/validate.js';
import { getJson, type PayloadStore } from '../../adapters/nats/connection/payloads.js';
import { withNatsRetry } from '../../adapters/nats/connection/nats-retry.js';
import type { Taxonomy } from '../../adapters/taxonomy/index.js';
import type { CategorySource, SharedCategories } from './category-index.js';
import { matrixOptions, TaxonomyClassifier } from './classifier.js';
import { requestClassifierOptions, requestTaxonomy } from './classify.js';
import { resolveClassifierOptions, type ClassifierOptions, type ClassifierOptionsInput } from './options.js';

/**
 * What a classify worker keeps between chunks: the specs it read (by reference: every chunk of a
 * run names the same one) and open classifiers, one per taxonomy and what its matrices are built
 * from (model, image model, template, role, maximum length), so the chunks of a run, and of later
 * runs with the same taxonomy and model, reuse one category matrix and one search thread. Per-run
 * settings (top-k, candidates, rerank, hierarchy, threshold) are applied per chunk. The least
 * recently used classifier that no chunk is using is closed when more are open than `keep`.
 */

export interface RunSpec {
  spec: ClassifyJobSpec;
  taxonomy: Taxonomy;
  /** The spec's settings, for `classify(items, call, options)`. */
  options: ClassifierOptions;
  input: ClassifierOptionsInput;
}

interface Kept {
  readonly opened: Promise<TaxonomyClassifier>;
  /** Chunks using it now: never closed under them. */
  users: number;
}

export interface JobClassifiersOptions {
  payloads: PayloadStore;
  /** A fresh engine per classifier (each with job ids of its own). */
  engine: () => Engine;
  /** Local category cache, in front of `shared`. */
  cacheDir: string | null;
  shared: SharedCategories;
  onSharedError?: (error: unknown) => void;
  /** Classifiers kept open. @default 3 */
  keep?: number;
  /** Told how each classifier got its category matrix, and how long it took. */
  onOpened?: (source: CategorySource, categories: number, seconds: number, where: string) => void;
}

/** Specs kept parsed (a taxonomy text is up to 8 MiB, and its parsed tree as much again). */
const KEPT_SPECS = 8;

export class JobClassifiers {
  readonly #options: JobClassifiersOptions;
  readonly #specs = new Map<string, Promise<RunSpec>>();
  readonly #classifiers = new Map<string, Kept>();
  readonly #closed = new AbortController();

  constructor(options: JobClassifiersOptions) {
    this.#options = options;
  }

  /** The spec at `ref`, read once (INVALID_INPUT when it is missing or is not a spec: the run cannot go on). */
  spec(ref: string): Promise<RunSpec> {
    let found = this.#specs.get(ref);
    if (found === undefined) {
      found = this.#readSpec(ref);
      // A spec that could not be read (an outage) is read again by the next chunk.
      found.catch(() => this.#specs.delete(ref));
      this.#specs.set(ref, found);
      while (this.#specs.size > KEPT_SPECS) {
        const oldest = this.#specs.keys().next().value;
        if (oldest === undefined) break;
        this.#specs.delete(oldest);
      }
    }
    return found;
  }

  async #readSpec(ref: string): Promise<RunSpec> {
    const value = await withNatsRetry(`read the classification spec ${ref}`, () => getJson(this.#options.payloads, ref));
    const spec = parseWith(ClassifyJobSpec, value, `classification spec ${ref}`);
    // A target this worker could not write fails the run at its first chunk, not after the last one.
    if (spec.result !== undefined) await this.#options.payloads.checkWriteTarget(spec.result);
    const taxonomy = requestTaxonomy(spec.request);
    const input = { ...requestClassifierOptions(spec.request, this.#options.cacheDir), sharedCategories: this.#options.shared };
    return { spec, taxonomy, options: resolveClassifierOptions(input), input };
  }

  /**
   * Runs `use` with the classifier of `run` (opened once: its category matrix from the cache, the
   * object store, or embedded through the model workers).
   */
  async use<T>(run: RunSpec, signal: AbortSignal, use: (classifier: TaxonomyClassifier) => Promise<T>): Promise<T> {
    const key = JSON.stringify([run.taxonomy.hash, matrixOptions(run.options)]);
    let kept = this.#classifiers.get(key);
    if (kept === undefined) {
      const started = performance.now();
      const opened = TaxonomyClassifier.open(this.#options.engine(), run.taxonomy, run.input, { signal: AbortSignal.any([signal, this.#closed.signal]) });
      kept = { opened, users: 0 };
      const entry = kept;
      opened.then(
        (classifier) => {
          const stats = classifier.categoryStats;
          this.#options.onOpened?.(stats.source, stats.categories, (performance.now() - started) / 1000, stats.file ?? 'memory');
        },
        // A failed open is forgotten: the next chunk opens it again.
        () => {
          if (this.#classifiers.get(key) === entry) this.#classifiers.delete(key);
        },
      );
      this.#classifiers.set(key, kept);
    } else {
      // Most recently used last.
      this.#classifiers.delete(key);
      this.#classifiers.set(key, kept);
    }
    kept.users += 1;
    try {
      return await use(await kept.opened);
    } finally {
      kept.users -= 1;
      this.#evict();
    }
  }

  #evict(): void {
    const keep = this.#options.keep ?? 3;
    for (const [key, kept] of this.#classifiers) {
      if (this.#classifiers.size <= keep) return;
      if (kept.users > 0) continue;
      this.#classifiers.delete(key);
      void kept.opened.then((classifier) => classifier.close()).catch(() => undefined);
    }
  }

  /** Closes every classifier (their search threads); opens in progress are aborted. */
  async close(): Promise<void> {
    this.#closed.abort();
    const all = [...this.#classifiers.values()];
    this.#classifiers.clear();
    this.#specs.clear();
    await Promise.all(all.map((kept) => kept.opened.then((classifier) => classifier.close()).catch(() => undefined)));
  }
}

/** A job id prefix of its own for each classifier's engine: two workers never answer each other's jobs. */
export function classifierJobPrefix(): string {
  return `c${randomBytes(8).toString('hex')}`;
}
