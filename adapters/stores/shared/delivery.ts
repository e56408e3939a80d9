import { ErrorCode, ShoalError, toShoalError } from '../../protocol/errors.js';
import { searchTextOf } from './text-search.js';
import type { ChunkRow, DocumentState, SearchHit, SearchOptions, Store, SparseValues, TableSpec, MultivectorSearchOptions, QueryVector } from '../store.js';

/**
 * Delivery to a store that may be down or slow: every call of the wrapped sink is retried with
 * exponential backoff and jitter while it fails with a transient code (UNAVAILABLE, TIMEOUT),
 * within a bounded time, then fails with UNAVAILABLE naming the backend and the attempts. A
 * commit is safe to repeat (upserts by id, stale rows deleted by source, states last; pgvector
 * does it in one transaction), so a retried commit never duplicates rows, and the caller counts
 * a document done only when commit() resolves.
 */

export interface RetryOptions {
  /** First pause. @default 200 */
  baseDelayMs?: number;
  /** Longest pause. @default 5_000 */
  maxDelayMs?: number;
  /** Give up once this long has passed since the first attempt. @default 60_000 */
  maxElapsedMs?: number;
  signal?: AbortSignal | undefined;
}

export type WriteOutcome = 'ok' | 'retry' | 'failed';

/** What a process with a metrics registry records (shoal_sink_writes_total, shoal_sink_write_seconds). */
export interface StoreWriteObserver {
  write(backend: string, outcome: WriteOutcome, seconds: number): void;
  /** Any call (a write, a state read...) failed transiently and is about to be retried: the store is degraded. */
  retrying?(backend: string, failure: ShoalError): void;
  /** Any call succeeded: a degraded store answers again. */
  succeeded?(backend: string): void;
}

const TRANSIENT: ReadonlySet<string> = new Set([ErrorCode.UNAVAILABLE, ErrorCode.TIMEOUT]);

function pause(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted === true) {
      reject(new ShoalError(ErrorCode.CANCELLED, 'interrupted'));
      return;
    }
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(new ShoalError(ErrorCode.CANCELLED, 'interrupted'));
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** Runs `body` until it succeeds, fails with a non-transient code, or the time bound passes. */
export async function withRetry<T>(what: string, body: () => Promise<T>, options: RetryOptions = {}, onRetry?: (failure: ShoalError) => void): Promise<T> {
  const base = options.baseDelayMs ?? 200;
  const cap = options.maxDelayMs ?? 5_000;
  const bound = options.maxElapsedMs ?? 60_000;
  const started = Date.now();
  for (let attempt = 1; ; attempt++) {
    try {
      return await body();
    } catch (error) {
      const failure = toShoalError(error);
      if (!TRANSIENT.has(failure.code)) throw failure;
      const elapsed = Date.now() - started;
      if (elapsed >= bound) {
        throw new ShoalError(ErrorCode.UNAVAILABLE, `${what}: still failing after ${attempt} attempts in ${Math.round(elapsed / 1000)} s: ${failure.message}`, { cause: error });
      }
      onRetry?.(failure);
      // Full jitter: many writers retrying a store that comes back do not arrive together.
      const delay = Math.min(cap, base * 2 ** (attempt - 1)) * (0.5 + Math.random() / 2);
      await pause(Math.min(delay, Math.max(0, bound - elapsed)), options.signal);
    }
  }
}

export class RetryingStore implements Store {
  readonly #inner: Store;
  readonly #backend: string;
  readonly #retry: RetryOptions;
  readonly #observer: StoreWriteObserver | undefined;

  constructor(inner: Store, backend: string, retry: RetryOptions = {}, observer?: StoreWriteObserver) {
    this.#inner = inner;
    this.#backend = backend;
    this.#retry = retry;
    this.#observer = observer;
  }

  #retrying(failure: ShoalError): void {
    this.#observer?.retrying?.(this.#backend, failure);
  }

  async #run<T>(what: string, body: () => Promise<T>): Promise<T> {
    const value = await withRetry(`${this.#backend} ${what}`, body, this.#retry, (failure) => this.#retrying(failure));
    this.#observer?.succeeded?.(this.#backend);
    return value;
  }

  prepare(spec: TableSpec): Promise<void> {
    return this.#run('prepare', () => this.#inner.prepare(spec));
  }

  describe(): Promise<TableSpec | null> {
    return this.#run('describe', () => this.#inner.describe());
  }

  states(sources: readonly string[]): Promise<Map<string, DocumentState>> {
    return this.#run('states', () => this.#inner.states(sources));
  }

  async commit(rows: readonly ChunkRow[], states: readonly DocumentState[]): Promise<void> {
    const started = process.hrtime.bigint();
    const seconds = (): number => Number(process.hrtime.bigint() - started) / 1e9;
    try {
      await withRetry(`${this.#backend} write`, () => this.#inner.commit(rows, states), this.#retry, (failure) => {
        this.#observer?.write(this.#backend, 'retry', seconds());
        this.#retrying(failure);
      });
    } catch (error) {
      this.#observer?.write(this.#backend, 'failed', seconds());
      throw error;
    }
    this.#observer?.write(this.#backend, 'ok', seconds());
    this.#observer?.succeeded?.(this.#backend);
  }

  statesUnder(prefix: string): Promise<DocumentState[]> {
    return this.#run('states', () => this.#inner.statesUnder(prefix));
  }

  /** Retried as a whole: deleting what is already gone is a no-op. */
  remove(sources: readonly string[]): Promise<void> {
    return this.#run('remove', () => this.#inner.remove(sources));
  }

  count(filter?: string): Promise<number> {
    return this.#run('count', () => this.#inner.count(filter));
  }

  search(vector: QueryVector, options: SearchOptions): Promise<SearchHit[]> {
    return this.#run('search', () => this.#inner.search(vector, options));
  }

  searchSparse(query: SparseValues, options: SearchOptions): Promise<SearchHit[]> {
    return this.#run('sparse search', () => this.#inner.searchSparse(query, options));
  }

  searchMultivector(query: readonly (readonly number[])[], options: MultivectorSearchOptions): Promise<SearchHit[]> {
    return this.#run('multi-vector search', () => this.#inner.searchMultivector(query, options));
  }

  /** Forwarded, or UNSUPPORTED_OPERATION (not retried) when the backend cannot rank by text. */
  searchText(query: string, options: SearchOptions): Promise<SearchHit[]> {
    return this.#run('text search', () => searchTextOf(this.#inner, query, options));
  }

  optimize(): Promise<void> {
    return this.#run('optimize', () => this.#inner.optimize());
  }

  close(): Promise<void> {
    return this.#inner.close();
  }
}
