import { searchTextOf } from './text-search.js';
import type { ChunkRow, DocumentState, SearchHit, SearchOptions, Store, SparseValues, TableSpec, MultivectorSearchOptions, QueryVector } from '../store.js';

/**
 * A Store whose backend module is imported on first use. The database clients (LanceDB with
 * apache-arrow, pg, chromadb, Qdrant's) take a third of a second to import, and every `shoal`
 * command reaches `openStore` through the command tree, `shoal encode` included: imported eagerly,
 * each run of a command that never opens an index paid for all four.
 *
 * The load is single-flight; a rejected one (a module that fails to import, a constructor that
 * refuses its options) is forgotten, so the next call tries again and reports the same error.
 */
export class LazyStore implements Store {
  readonly #load: () => Promise<Store>;
  #loading: Promise<Store> | null = null;

  constructor(load: () => Promise<Store>) {
    this.#load = load;
  }

  #sink(): Promise<Store> {
    if (this.#loading === null) {
      const loading = this.#load();
      this.#loading = loading;
      loading.catch(() => {
        if (this.#loading === loading) this.#loading = null;
      });
    }
    return this.#loading;
  }

  async prepare(spec: TableSpec): Promise<void> {
    return (await this.#sink()).prepare(spec);
  }

  async describe(): Promise<TableSpec | null> {
    return (await this.#sink()).describe();
  }

  async states(sources: readonly string[]): Promise<Map<string, DocumentState>> {
    return (await this.#sink()).states(sources);
  }

  async commit(rows: readonly ChunkRow[], states: readonly DocumentState[]): Promise<void> {
    return (await this.#sink()).commit(rows, states);
  }

  async statesUnder(prefix: string): Promise<DocumentState[]> {
    return (await this.#sink()).statesUnder(prefix);
  }

  async remove(sources: readonly string[]): Promise<void> {
    return (await this.#sink()).remove(sources);
  }

  async count(filter?: string): Promise<number> {
    return (await this.#sink()).count(filter);
  }

  async search(vector: QueryVector, options: SearchOptions): Promise<SearchHit[]> {
    return (await this.#sink()).search(vector, options);
  }

  async searchSparse(query: SparseValues, options: SearchOptions): Promise<SearchHit[]> {
    return (await this.#sink()).searchSparse(query, options);
  }

  async searchMultivector(query: readonly (readonly number[])[], options: MultivectorSearchOptions): Promise<SearchHit[]> {
    return (await this.#sink()).searchMultivector(query, options);
  }

  /** The backend's full-text search, or UNSUPPORTED_OPERATION when it has none (known only once loaded). */
  async searchText(query: string, options: SearchOptions): Promise<SearchHit[]> {
    return searchTextOf(await this.#sink(), query, options);
  }

  async optimize(): Promise<void> {
    return (await this.#sink()).optimize();
  }

  /** Closes the backend if it was ever opened; one never used has nothing to close. */
  async close(): Promise<void> {
    const loading = this.#loading;
    if (loading === null) return;
    const sink = await loading.catch(() => null);
    await sink?.close();
  }
}
