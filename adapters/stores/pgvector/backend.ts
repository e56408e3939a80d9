import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { ErrorCode, ShoalError } from '../../protocol/errors.js';
import { redactUri } from '../../protocol/uri-credentials.js';
import { LazyStore } from '../shared/lazy.js';
import { STORE_TIMEOUT_SETTING } from '../shared/remote-settings.js';
import { checkTableName } from '../shared/table-names.js';
import { hostPart, onFirstUse, parsePart, parseUrl, portPart, queryParts, tableNamePart } from '../shared/uri-parts.js';
import type { IndexRef, StoreBackend, StoreCredentials } from '../store-backend.js';
import type { PgConnection } from './store.js';
import { DEFAULT_HNSW_BUILD } from './hnsw-defaults.js';

const FORM = 'postgres://user@host:port/db?table=T';
const sslMode = onFirstUse(() => z.enum(['disable', 'require', 'verify-full']));

const postgresParts = onFirstUse(() =>
  z.strictObject({
    user: z.string().min(1).max(63),
    password: z.string().max(1_000).optional(),
    host: hostPart(),
    port: portPart(),
    database: z.string().regex(/^[A-Za-z0-9_$-]{1,63}$/, 'a database name'),
    table: tableNamePart().optional(),
    sslmode: sslMode().optional(),
    sslrootcert: z.string().min(1).max(4_096).optional(),
    /** HNSW candidate list per search (`hnsw.ef_search`); at least the store's candidate count. */
    ef_search: z.coerce.number().int().min(1).max(1_000).optional(),
    /** HNSW build parameters (pgvector `m`, `ef_construction`) of the index optimize() builds. */
    hnsw_m: z.coerce.number().int().min(2).max(100).optional(),
    hnsw_ef_construction: z.coerce.number().int().min(4).max(1_000).optional(),
    /** Milliseconds a query may wait for its answer before it fails UNAVAILABLE (index builds excepted). */
    query_timeout: z.coerce.number().int().min(100).max(86_400_000).optional(),
  }).refine(
    // pgvector refuses the index otherwise, at the end of the run that fills the table: said when the URI is read.
    (parts) => (parts.hnsw_ef_construction ?? DEFAULT_HNSW_BUILD.efConstruction) >= 2 * (parts.hnsw_m ?? DEFAULT_HNSW_BUILD.m),
    { path: ['hnsw_ef_construction'], message: `must be at least twice hnsw_m (pgvector's defaults: m ${DEFAULT_HNSW_BUILD.m}, ef_construction ${DEFAULT_HNSW_BUILD.efConstruction})` },
  ),
);

/** The client's connection: the URI's parts, its password or PGPASSWORD, and TLS as `sslmode` (or PGSSLMODE) asks. */
function pgConnection(parts: z.output<ReturnType<typeof postgresParts>>, credentials: StoreCredentials): PgConnection {
  const mode = parts.sslmode ?? parsePart(sslMode().optional(), credentials.pgSslMode, 'PGSSLMODE') ?? 'disable';
  const caFile = parts.sslrootcert ?? credentials.pgSslRootCert;
  let ssl: PgConnection['ssl'] = false;
  if (mode === 'require') ssl = { rejectUnauthorized: false };
  if (mode === 'verify-full') {
    let ca: string | undefined;
    if (caFile !== undefined) {
      try {
        ca = readFileSync(caFile, 'utf8');
      } catch (error) {
        throw new ShoalError(ErrorCode.CONFIG_INVALID, `cannot read the PostgreSQL CA file ${caFile}: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
      }
    }
    ssl = { rejectUnauthorized: true, ca };
  }
  return { host: parts.host, port: parts.port, user: parts.user, password: parts.password ?? credentials.pgPassword, database: parts.database, ssl };
}

/** PostgreSQL with the pgvector extension: HNSW (cosine), ts_rank full-text search. */
export const pgvectorBackend = {
  name: 'pgvector',
  schemes: ['postgres', 'postgresql'],
  forms: [FORM],
  summary: 'PostgreSQL with pgvector: HNSW index, ts_rank full-text search, one table per index table',
  capabilities: { search: 'ann', fullText: true, metadataFilters: true, sizes: true, embedded: false },
  settings: {
    pgPassword: { env: ['PGPASSWORD'], meaning: 'password for a `postgres://` index whose URI has none (never logged)', default: null, shown: 'none' },
    pgSslMode: { env: ['PGSSLMODE'], meaning: 'TLS to PostgreSQL: `disable`, `require` (encrypted) or `verify-full` (certificate and host checked); a URI\'s `sslmode=` wins', default: 'disable' },
    pgSslRootCert: { env: ['PGSSLROOTCERT'], meaning: 'CA bundle file for `verify-full`; a URI\'s `sslrootcert=` wins', default: null, shown: 'system roots' },
    storeTimeoutMs: STORE_TIMEOUT_SETTING,
  },
  parse(uri, context): IndexRef {
    const parsed = parseUrl(uri);
    const params = queryParts(parsed, ['table', 'sslmode', 'sslrootcert', 'ef_search', 'hnsw_m', 'hnsw_ef_construction', 'query_timeout'], FORM);
    const parts = parsePart(postgresParts(), {
      user: decodeURIComponent(parsed.username) || undefined,
      ...(parsed.password === '' ? {} : { password: decodeURIComponent(parsed.password) }),
      host: parsed.hostname,
      port: parsed.port === '' ? 5432 : parsed.port,
      database: decodeURIComponent(parsed.pathname.replace(/^\//, '')) || undefined,
      ...params,
    }, FORM);
    const table = parts.table ?? parsePart(tableNamePart(), context.fallbackTable, 'table');
    const connection = pgConnection(parts, context.credentials);
    // The URI's own timeout, else the one every server store reads (SHOAL_STORE_TIMEOUT_MS).
    const queryTimeoutMs = parts.query_timeout ?? context.credentials.storeTimeoutMs;
    const options = {
      connection,
      table: checkTableName(table),
      ...(context.batchRows === undefined ? {} : { batchRows: context.batchRows }),
      ...(parts.ef_search === undefined ? {} : { efSearch: parts.ef_search }),
      ...(parts.hnsw_m === undefined ? {} : { hnswM: parts.hnsw_m }),
      ...(parts.hnsw_ef_construction === undefined ? {} : { hnswEfConstruction: parts.hnsw_ef_construction }),
      ...(queryTimeoutMs === undefined ? {} : { queryTimeoutMs }),
    };
    return {
      backend: 'pgvector',
      display: redactUri(uri),
      table,
      localDir: null,
      open: () => new LazyStore(async () => new (await import('./store.js')).PgVectorStore(options)),
      openAdmin: async () => new (await import('./admin.js')).PgVectorAdmin({ connection }),
    };
  },
} as const satisfies StoreBackend;
