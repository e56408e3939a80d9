import type { S3SettingsInput } from '../object-store/index.js';
import type { IndexAdmin } from './shared/index-admin.js';
import type { Store } from './store.js';

/**
 * What a vector-store backend is to the rest of Shoal: one object per backend folder
 * (`adapters/stores/<backend>/backend.ts`), listed once in `registry.ts`. Everything that differs
 * between backends and is known before connecting lives here: the URI schemes it answers to, the
 * forms `--index` help and docs show, the settings it reads, what it can do, and how its URI is
 * parsed. Connecting is deferred to `IndexRef.open()`, which imports the backend's client on first
 * use (the database clients take a third of a second to import; `shoal encode` never needs one).
 */

/** Credentials and client settings a store may need; the services fill them from ShoalSettings. Never logged. */
export interface StoreCredentials {
  pgPassword?: string | undefined;
  /** `disable`, `require` or `verify-full`; a URI's `sslmode=` wins. */
  pgSslMode?: string | undefined;
  /** CA bundle file for `verify-full`; a URI's `sslrootcert=` wins. */
  pgSslRootCert?: string | undefined;
  chromaApiKey?: string | undefined;
  chromaTenant?: string | undefined;
  chromaDatabase?: string | undefined;
  qdrantApiKey?: string | undefined;
  /** Longest wait for one Chroma or Qdrant request (not a secret, but read from the environment with them). @default 60_000 */
  storeTimeoutMs?: number | undefined;
}

/** What a backend can do, for the backends table of docs/storage.md. */
export interface StoreCapabilities {
  /** Nearest-neighbour search: an approximate index past a size, or an exact scan of every row. */
  search: 'ann' | 'exact';
  /** `--mode text`: ranks chunks by their text (BM25, ts_rank). */
  fullText: boolean;
  /** `metadata.<field>` filters. */
  metadataFilters: boolean;
  /** Bytes on disk in `shoal index stats` (null where the store does not tell). */
  sizes: boolean;
  /** Runs on the machine with no server (a folder). */
  embedded: boolean;
}

/** What a URI is parsed with: the table when it names none, and the settings its backend may need. */
export interface ParseContext {
  /** Table or collection when the URI names none. */
  fallbackTable: string;
  credentials: StoreCredentials;
  /** S3 client settings for `s3://` indexes (endpoint, region, credentials). */
  s3: S3SettingsInput;
  /** Rows per write batch (pgvector, Chroma, Qdrant). */
  batchRows?: number | undefined;
}

/**
 * An `--index` URI parsed once, at the edge (CLI flag, HTTP configuration, a job as it arrives),
 * and passed down: which backend, which table, a printable form without credentials, and how to
 * open it. Holding one connects to nothing; `open()` returns a Store that connects on first use.
 */
export interface IndexRef {
  /** The registry name of the backend (`lancedb`, `pgvector`...). */
  readonly backend: string;
  /** The URI with any password removed, for messages and logs. */
  readonly display: string;
  /** The table or collection the rows go to. */
  readonly table: string;
  /** The local folder the index lives in (absolute), or null for a server or a bucket: `shoal ingest .` must not walk into its own index. */
  readonly localDir: string | null;
  /** A new, unconnected Store of this table. Close it when done. */
  readonly open: () => Store;
  /** The store the table lives in, for listing its tables and their sizes. Close it when done. */
  readonly openAdmin: () => Promise<IndexAdmin>;
}

/**
 * A setting a backend reads, keyed by its StoreCredentials field: the services' settings table
 * (services/settings/table.ts) takes these entries from the registry, so its variables, the
 * generated docs table and the values handed to the backend come from this one declaration.
 */
export interface StoreSettingSpec {
  /** Environment variables, the preferred one first. */
  readonly env: readonly string[];
  readonly meaning: string;
  /** The default the config code uses (null: unset). */
  readonly default: string | number | null;
  /** How the default reads in the settings table, when the value alone does not say it. */
  readonly shown?: string;
}

export type StoreSettings = Readonly<Partial<Record<keyof StoreCredentials, StoreSettingSpec>>>;

export interface StoreBackend {
  /** The registry name, also the metric label and `shoal index stats`' `backend`. */
  readonly name: string;
  /** URI schemes (lower case, without `://`) this backend parses. */
  readonly schemes: readonly string[];
  /** A bare folder path (no scheme) is this backend's: the default store. */
  readonly bareFolder?: true;
  /** The URI forms `--index` help, errors and docs show. */
  readonly forms: readonly string[];
  /** One line for the docs table. */
  readonly summary: string;
  readonly capabilities: StoreCapabilities;
  /** The settings it reads (credentials, timeouts), for the settings table and docs. */
  readonly settings: StoreSettings;
  /** `uri` (whose scheme is one of `schemes`, or a bare folder) → its IndexRef; a bad URI is INVALID_INPUT with `details.field` 'index'. */
  parse(uri: string, context: ParseContext): IndexRef;
}
