import type { ParsedClassifyRequest } from '../../adapters/protocol/classify.js';
import type { Engine } from '../../adapters/protocol/engine.js';
import { abortable } from '../../adapters/support/abortable.js';
import type { Taxonomy } from '../../adapters/taxonomy/index.js';
import { matrixOptions, requestClassifierOptions, resolveClassifierOptions, TaxonomyClassifier } from '../../pipelines/classify/index.js';

/**
 * The category matrices of synchronous POST /v1/classify: kept in memory for the taxonomies used
 * last (so a second request with the same taxonomy and model embeds only its products), and built
 * once for all the requests that wait for the same one. A build runs for as long as some request
 * still waits for it: when the last one leaves (its deadline passed, 504, or its client went away)
 * the build is aborted and forgotten, instead of embedding thousands of categories for minutes
 * for nobody (issue 42 #13: a timed-out request kept a worker busy long after its 504).
 */

interface Build {
  readonly opened: Promise<TaxonomyClassifier>;
  readonly controller: AbortController;
  /** Requests waiting for this build right now. */
  waiting: number;
  settled: boolean;
}

export interface KeptClassifiersOptions {
  /** Engine the categories are embedded through. */
  engine: Engine;
  /** Matrices kept in memory (each 10k categories × 384 dims is 16 MB). */
  keep: number;
}

export class KeptClassifiers {
  readonly #engine: Engine;
  readonly #keep: number;
  // Keyed by the taxonomy and what its matrices are built from (model, template…), not by top_k,
  // threshold or rerank, which each request applies to the kept matrices itself. Oldest first.
  readonly #builds = new Map<string, Build>();
  readonly #closed = new AbortController();

  constructor(options: KeptClassifiersOptions) {
    this.#engine = options.engine;
    this.#keep = options.keep;
  }

  /** Builds in progress or kept (tests). */
  get size(): number {
    return this.#builds.size;
  }

  /**
   * The classifier of `taxonomy` for `request`, built or kept. `signal` is this request's life: it
   * stops waiting when it aborts, and a build nobody else waits for is aborted with it.
   */
  async use(request: ParsedClassifyRequest, taxonomy: Taxonomy, signal: AbortSignal): Promise<TaxonomyClassifier> {
    const key = JSON.stringify([taxonomy.hash, matrixOptions(resolveClassifierOptions(requestClassifierOptions(request)))]);
    const build = this.#builds.get(key) ?? this.#start(key, request, taxonomy);
    // Most recently used last.
    this.#builds.delete(key);
    this.#builds.set(key, build);
    this.#evict();
    if (build.settled) return build.opened;
    build.waiting += 1;
    try {
      return await abortable(build.opened, signal, 'the client went away or the request timed out');
    } finally {
      build.waiting -= 1;
      if (build.waiting === 0 && !build.settled) {
        build.controller.abort();
        this.#forget(key, build);
      }
    }
  }

  #start(key: string, request: ParsedClassifyRequest, taxonomy: Taxonomy): Build {
    const controller = new AbortController();
    // The gateway's own memory, not the disk cache; stopped by its last waiter or by close().
    const opened = TaxonomyClassifier.open(this.#engine, taxonomy, requestClassifierOptions(request), { signal: AbortSignal.any([controller.signal, this.#closed.signal]) });
    const build: Build = { opened, controller, waiting: 0, settled: false };
    opened.then(
      () => {
        build.settled = true;
      },
      () => {
        build.settled = true;
        // A failed (or aborted) build is forgotten, so the next request tries again.
        this.#forget(key, build);
      },
    );
    return build;
  }

  #forget(key: string, build: Build): void {
    if (this.#builds.get(key) === build) this.#builds.delete(key);
  }

  #evict(): void {
    while (this.#builds.size > this.#keep) {
      const [oldest, evicted] = this.#builds.entries().next().value ?? [];
      if (oldest === undefined || evicted === undefined) break;
      this.#builds.delete(oldest);
      // A build still waited for finishes for its waiters, then is closed.
      void evicted.opened.then((classifier) => classifier.close()).catch(() => undefined);
    }
  }

  async close(): Promise<void> {
    this.#closed.abort();
    const all = [...this.#builds.values()];
    this.#builds.clear();
    await Promise.all(all.map((build) => build.opened.then((classifier) => classifier.close()).catch(() => undefined)));
  }
}
