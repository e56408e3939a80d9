import { ErrorCode, ShoalError } from '../../adapters/protocol/errors.js';
import type { RetryOptions, StoreWriteObserver } from '../../adapters/stores/shared/delivery.js';
import { openStore, parseIndexRef, type StoreCredentials } from '../../adapters/stores/open.js';
import type { S3SettingsInput } from '../../adapters/object-store/index.js';
import type { Store } from '../../adapters/stores/store.js';

/**
 * The indexes a gateway serves, by name (SHOAL_INDEXES `name=target,...`). A request names an
 * index, never a path: only what the operator configured is ever opened (no traversal from a
 * request body). Opening a target is one function, so other sink kinds plug in here.
 */

export const INDEX_NAME = /^[A-Za-z0-9_-]{1,64}$/;

/** What a configured index is opened with: the store credentials and S3 settings from the environment. */
export interface IndexStoreOptions {
  credentials?: StoreCredentials;
  s3?: S3SettingsInput;
}

/**
 * Opens the sink of a configured target: any `--index` form (a folder = LanceDB, postgres://,
 * chroma://, qdrant://, file://, s3://); `observer` hears its retries and recoveries (ingest runs);
 * `retry` bounds how long a failing store is retried. @default a minute (delivery.ts)
 */
export function openIndexStore(target: string, options: IndexStoreOptions = {}, observer?: StoreWriteObserver, retry?: RetryOptions): Store {
  const ref = parseIndexRef(target, { credentials: options.credentials ?? {}, s3: options.s3 ?? {} });
  return openStore(ref, { ...(observer === undefined ? {} : { observer }), ...(retry === undefined ? {} : { retry }) }).store;
}

/** NOT_FOUND for a name no configured index has, naming the configured ones (the one wording of both lookups). */
export function noSuchIndex(name: string, known: readonly string[]): ShoalError {
  return new ShoalError(ErrorCode.NOT_FOUND, `no index named ${JSON.stringify(name)} on this gateway (${known.length === 0 ? 'none configured: set SHOAL_INDEXES=name=dir' : `configured: ${known.join(', ')}`})`, {
    details: { index: name, configured: [...known] },
  });
}

/** The target of a configured index name; NOT_FOUND names the configured ones. */
export function indexTarget(indexes: Readonly<Record<string, string>> | undefined, name: string): string {
  const target = indexes === undefined || !Object.hasOwn(indexes, name) ? undefined : indexes[name];
  if (target === undefined) throw noSuchIndex(name, Object.keys(indexes ?? {}));
  return target;
}
