import { ErrorCode, ShoalError } from '../../adapters/protocol/errors.js';

/**
 * Which served indexes' stores are known to be down, so a search fails fast while one is. Before,
 * every search of a stopped store (pgvector, Chroma, Qdrant) retried its connection for up to a
 * minute and answered 504 at the gateway's deadline: each caller held for 60 s, and the retries
 * went on after the answer. Now a search's store calls retry for a few seconds only (bounded by
 * SEARCH_STORE_RETRY_MS and the request's life), a store that fails transiently is remembered as
 * down for STORE_DOWN_MS, and searches of that index meanwhile answer 503 UNAVAILABLE at once with
 * a Retry-After of the time left. The first search after the window probes the store again; a
 * store call that succeeds clears the mark. Keyed by configured index name only (indexTarget
 * refuses others first), so the map is bounded by SHOAL_INDEXES.
 */

/** How long a store that failed is answered for without being asked. */
export const STORE_DOWN_MS = 10_000;
/** How long one search retries a failing store before it answers 503 (the default sink retry is a minute, for ingest writes). */
export const SEARCH_STORE_RETRY_MS = 3_000;

export class IndexOutages {
  readonly #windowMs: number;
  readonly #down = new Map<string, { until: number; reason: string }>();

  constructor(windowMs: number = STORE_DOWN_MS) {
    this.#windowMs = windowMs;
  }

  /** Throws UNAVAILABLE, with the seconds left as its retry hint, while `index`'s store is known down. */
  check(index: string): void {
    const down = this.#down.get(index);
    if (down === undefined) return;
    const left = down.until - Date.now();
    if (left <= 0) {
      this.#down.delete(index);
      return;
    }
    const retryAfterSeconds = Math.max(1, Math.ceil(left / 1000));
    throw new ShoalError(ErrorCode.UNAVAILABLE, `the store of index ${index} is not answering (${down.reason}); retry in ${retryAfterSeconds} s`, {
      details: { index, retryAfterSeconds },
    });
  }

  /** A store call of `index` failed with `failure`: transient failures mark the store down. */
  failed(index: string, failure: ShoalError): void {
    if (failure.code !== ErrorCode.UNAVAILABLE && failure.code !== ErrorCode.TIMEOUT) return;
    this.#down.set(index, { until: Date.now() + this.#windowMs, reason: failure.message.slice(0, 300) });
  }

  /** A store call of `index` succeeded: it is up. */
  answered(index: string): void {
    this.#down.delete(index);
  }
}
