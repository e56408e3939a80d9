import { RetryingStore, type RetryOptions, type StoreWriteObserver } from './shared/delivery.js';
import type { IndexAdmin } from './shared/index-admin.js';
import type { StoreName } from './registry.js';
import type { IndexRef } from './store-backend.js';
import type { Store } from './store.js';

import { parseIndexRef, type IndexRefOptions } from './registry.js';

export { localIndexDir, parseIndexRef, redactUri, type IndexRefOptions } from './registry.js';
export type { IndexRef, StoreCredentials } from './store-backend.js';

/**
 * An IndexRef → a Store, with the retries every caller wants (a failing store is retried with
 * backoff until `retry` gives up, each failure told to `observer`). The backend's client is
 * imported when the store is first used (IndexRef.open), not here: every `shoal` command reaches
 * this module through the command tree, `shoal encode` included.
 */

export interface OpenStoreOptions {
  retry?: RetryOptions;
  observer?: StoreWriteObserver;
}

export interface OpenedStore {
  store: Store;
  /** @deprecated The same object as `store`, under the name the library's `openIndex` answered with before stores had their own word; kept for existing callers. */
  sink: Store;
  backend: StoreName;
  /** The URI with any password removed, for messages and logs. */
  display: string;
  table: string;
  /** The store the table lives in, for listing its tables and their sizes (shared/index-admin.ts; imported on first use). Close it when done. */
  openAdmin: () => Promise<IndexAdmin>;
}

export function openStore(ref: IndexRef, options: OpenStoreOptions = {}): OpenedStore {
  const backend = ref.backend as StoreName;
  const store = new RetryingStore(ref.open(), backend, options.retry, options.observer);
  return {
    store,
    sink: store,
    backend,
    display: ref.display,
    table: ref.table,
    openAdmin: ref.openAdmin,
  };
}

/** Parse and open in one step, for callers that hold a URI once (a bench, a test, a library call): each call parses again. */
export function openIndexUri(uri: string, options: OpenStoreOptions & IndexRefOptions = {}): OpenedStore {
  return openStore(parseIndexRef(uri, options), options);
}
