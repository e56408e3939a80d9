import { ErrorCode, ShoalError } from '../../adapters/protocol/errors.js';
import { RetryingStore, type RetryOptions, type StoreWriteObserver } from '../../adapters/stores/shared/delivery.js';
import { parseIndexRef, type IndexRef, type OpenedStore } from '../../adapters/stores/open.js';
import type { StoreName } from '../../adapters/stores/registry.js';
import type { Store } from '../../adapters/stores/store.js';
import { noSuchIndex, type IndexStoreOptions } from './index-stores.js';

/**
 * The indexes a gateway serves (SHOAL_INDEXES), each parsed once when the gateway starts and
 * each store kept open across requests: a search reuses the LanceDB connection and its opened
 * table, the PostgreSQL connection pool, the HTTP agent of Chroma or Qdrant, instead of opening
 * and closing them per request (which cost a LanceDB table open, or a TCP and TLS handshake,
 * on every POST /v1/search). The stores stay fresh: LanceDB checks for other processes' commits
 * before each read, pgvector/Chroma/Qdrant/S3 ask their server.
 *
 * A store whose call failed as an outage (UNAVAILABLE, TIMEOUT: the retries ran out) is closed and
 * forgotten, so the next request opens it again from its IndexRef: a restarted server, a
 * replaced folder or a dropped connection heals without restarting the gateway.
 */

const OUTAGES: ReadonlySet<string> = new Set([ErrorCode.UNAVAILABLE, ErrorCode.TIMEOUT]);

/** The kept store seen through one caller's retries and observer; closing it leaves the kept store open. */
class BorrowedStore extends RetryingStore {
  override close(): Promise<void> {
    return Promise.resolve();
  }
}

export interface BorrowOptions {
  retry?: RetryOptions;
  observer?: StoreWriteObserver;
}

export class IndexPool {
  readonly #refs: ReadonlyMap<string, IndexRef>;
  readonly #open = new Map<string, Store>();
  #closed = false;

  /** Every configured URI parsed now: a bad one stops the gateway at start (CONFIG_INVALID), not its first request. */
  constructor(indexes: Readonly<Record<string, string>> | undefined, options: IndexStoreOptions = {}, parse: typeof parseIndexRef = parseIndexRef) {
    const refs = new Map<string, IndexRef>();
    for (const [name, uri] of Object.entries(indexes ?? {})) {
      try {
        refs.set(name, parse(uri, { credentials: options.credentials ?? {}, s3: options.s3 ?? {} }));
      } catch (error) {
        const reason = error instanceof Error ? error.message : String(error);
        throw new ShoalError(ErrorCode.CONFIG_INVALID, `SHOAL_INDEXES: index ${JSON.stringify(name)}: ${reason}`, { cause: error, details: { index: name } });
      }
    }
    this.#refs = refs;
  }

  /** The configured names, in their configured order. */
  names(): string[] {
    return [...this.#refs.keys()];
  }

  /** The IndexRef of a configured name; NOT_FOUND names the configured ones. */
  ref(name: string): IndexRef {
    const ref = this.#refs.get(name);
    if (ref === undefined) throw noSuchIndex(name, this.names());
    return ref;
  }

  /** The kept store of `name` (opened on first use), through `options`' retries; close() on it is a no-op. */
  borrow(name: string, options: BorrowOptions = {}): OpenedStore {
    const ref = this.ref(name);
    if (this.#closed) throw new ShoalError(ErrorCode.UNAVAILABLE, 'the gateway is stopping');
    let kept = this.#open.get(name);
    if (kept === undefined) {
      kept = ref.open();
      this.#open.set(name, kept);
    }
    const backend = ref.backend as StoreName;
    const store = new BorrowedStore(kept, backend, options.retry, options.observer);
    return { store, sink: store, backend, display: ref.display, table: ref.table, openAdmin: ref.openAdmin };
  }

  /**
   * Told of a request's failure on `name`: an outage closes the kept store (in the background) and
   * the next borrow opens a new one. Other failures (a bad filter, a missing table) keep it.
   */
  failed(name: string, error: unknown): void {
    if (!(error instanceof ShoalError) || !OUTAGES.has(error.code)) return;
    const kept = this.#open.get(name);
    if (kept === undefined) return;
    this.#open.delete(name);
    void kept.close().catch(() => undefined);
  }

  /** Closes every kept store (the gateway's onClose). */
  async close(): Promise<void> {
    this.#closed = true;
    const stores = [...this.#open.values()];
    this.#open.clear();
    await Promise.allSettled(stores.map((store) => store.close()));
  }
}
