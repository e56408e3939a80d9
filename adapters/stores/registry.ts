import { redactUri } from '../protocol/uri-credentials.js';
import { chromaBackend } from './chroma/backend.js';
import { fileBackend } from './file/backend.js';
import { lancedbBackend } from './lancedb/backend.js';
import { pgvectorBackend } from './pgvector/backend.js';
import { qdrantBackend } from './qdrant/backend.js';
import { s3Backend } from './s3/backend.js';
import { invalidIndex, setAcceptedForms, uriScheme } from './shared/uri-parts.js';
import type { IndexRef, ParseContext, StoreBackend, StoreSettingSpec } from './store-backend.js';

/**
 * Every vector-store backend, once. The `--index` help, the accepted-forms list of every URI
 * error, the store settings of the settings table (and so docs/configuration.md), the backends
 * table of docs/storage.md and the shared contract suite (test/conformance/stores.test.ts) all
 * come from this list. A new backend is a folder `adapters/stores/<name>/` with its
 * `backend.ts`, and one line here (docs/architecture.md, "Adding a store").
 */
export const STORES = [lancedbBackend, pgvectorBackend, chromaBackend, qdrantBackend, fileBackend, s3Backend] as const satisfies readonly StoreBackend[];

export type StoreName = (typeof STORES)[number]['name'];

/** The forms as one list, for help and errors: `a folder, lancedb://DIR[?table=T], postgres://…`. */
export const INDEX_FORMS: string = STORES.flatMap((store) => store.forms).join(', ');
setAcceptedForms(INDEX_FORMS.replace(/, ([^,]*)$/, ' or $1'));

/** The backend that parses `uri`: by its scheme, or the bare-folder one. */
export function storeFor(uri: string): StoreBackend {
  const scheme = uriScheme(uri);
  const backend = scheme === undefined ? STORES.find((store) => 'bareFolder' in store) : STORES.find((store) => (store.schemes as readonly string[]).includes(scheme));
  if (backend === undefined) throw invalidIndex(`unknown scheme ${JSON.stringify(`${scheme ?? ''}://`)}`);
  return backend;
}

/** Options of parseIndexRef: all but the table have the empty default (no credentials, the S3 SDK's own chain). */
export type IndexRefOptions = Partial<ParseContext> & { table?: string | undefined };

/**
 * `--index URI` (or a configured index's URI) → its IndexRef, parsed once: a bare folder or
 * `lancedb://DIR[?table=T]` is LanceDB (the default); `postgres://` pgvector;
 * `chroma://host:port/COLLECTION`; `qdrant://host:port/COLLECTION`; `file:///dir` JSON Lines;
 * `s3://bucket/prefix` JSON objects in S3. A bad URI is INVALID_INPUT with `details.field`
 * 'index'; credentials never appear in it (`redactUri`).
 */
export function parseIndexRef(uri: string, options: IndexRefOptions = {}): IndexRef {
  if (uri.trim() === '') throw invalidIndex('empty');
  const backend = storeFor(uri);
  return backend.parse(uri, {
    fallbackTable: options.table ?? options.fallbackTable ?? 'chunks',
    credentials: options.credentials ?? {},
    s3: options.s3 ?? {},
    batchRows: options.batchRows,
  });
}

/**
 * The local folder an index lives in (a plain folder, `lancedb://DIR`, `file:///DIR`), absolute;
 * null for a server or bucket, and for a URI that does not parse (the open that follows names the problem).
 */
export function localIndexDir(uri: string): string | null {
  try {
    return parseIndexRef(uri).localDir;
  } catch {
    return null;
  }
}

type UnionToIntersection<U> = (U extends unknown ? (value: U) => void : never) extends (value: infer I) => void ? I : never;
type DeclaredSettings = UnionToIntersection<(typeof STORES)[number]['settings']>;

/**
 * The settings the backends declare, merged (Chroma and Qdrant share one timeout): the settings
 * table spreads these, so each variable is declared by the backend that reads it.
 */
export const STORE_SETTINGS = Object.freeze(Object.assign({}, ...STORES.map((store) => store.settings))) as { readonly [K in keyof DeclaredSettings]: StoreSettingSpec & DeclaredSettings[K] };

export { redactUri };
