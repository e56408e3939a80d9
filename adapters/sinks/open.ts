import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import { ErrorCode, ShoalError } from '../protocol/errors.js';
import type { ChromaSinkOptions } from './chroma.js';
import { RetryingSink, type RetryOptions, type SinkWriteObserver } from './delivery.js';
import { JsonlSink } from './jsonl.js';
import { LazySink } from './lazy.js';
import type { PgConnection } from './pgvector.js';
import { S3Sink } from './s3.js';
import { checkLanceDbTableName, checkTableName, reservedSuffixOf } from './table-spec.js';
import type { S3SettingsInput } from '../object-store/index.js';
import type { Sink } from './sink.js';
import type { IndexAdmin } from './index-admin.js';
import { redactUri } from '../protocol/uri-credentials.js';
import { uriScheme } from './uri-scheme.js';

export { redactUri };

/**
 * `--index URI` → a Sink. A bare folder or `lancedb://DIR[?table=T]` is LanceDB (the default);
 * `postgres://` / `postgresql://` pgvector; `chroma://host:port/COLLECTION`;
 * `qdrant://host:port/COLLECTION`; `file:///dir` JSON Lines; `s3://bucket/prefix` JSON objects in S3.
 * Credentials come from the URI's password or the options (the services fill them from
 * PGPASSWORD, CHROMA_API_KEY, QDRANT_API_KEY or the settings file); they never appear in an
 * error or log line: `redactUri` is what gets printed.
 *
 * The database backends (LanceDB, pgvector, Chroma, Qdrant) are imported when their sink is
 * first used (lazy.ts), not with this module: every command reaches it, `shoal encode` included.
 * Their options are checked here, so a bad URI or table name is still refused at once.
 */

export type SinkBackend = 'lancedb' | 'pgvector' | 'chroma' | 'qdrant' | 'file' | 's3';

export interface SinkCredentials {
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

export interface OpenSinkOptions {
  /** Table or collection when the URI names none. @default 'chunks' */
  table?: string | undefined;
  credentials?: SinkCredentials;
  /** Rows per write batch (pgvector, Chroma, Qdrant). */
  batchRows?: number | undefined;
  retry?: RetryOptions;
  observer?: SinkWriteObserver;
  /** S3 client settings for `s3://` indexes (endpoint, region, credentials). @default the SDK's chain */
  s3?: S3SettingsInput;
}

export interface OpenedSink {
  sink: Sink;
  backend: SinkBackend;
  /** The URI with any password removed, for messages and logs. */
  display: string;
  table: string;
  /** The store the table lives in, for listing its tables and their sizes (index-admin.ts; imported on first use). Close it when done. */
  openAdmin: () => Promise<IndexAdmin>;
}

const ACCEPTED = 'a folder, lancedb://DIR[?table=T], postgres://user@host:port/db?table=T, chroma://host:port/COLLECTION, qdrant://host:port/COLLECTION, file:///dir or s3://bucket/prefix';

function invalid(message: string): ShoalError {
  return new ShoalError(ErrorCode.INVALID_INPUT, `--index: ${message} (accepted: ${ACCEPTED})`);
}

const Name = z
  .string()
  .regex(/^[A-Za-z0-9_-]{1,48}$/, "1 to 48 letters, digits, '_' or '-'")
  // `T__documents`, `T__spec`... are table T's own relations (table-spec.ts).
  .superRefine((name, context) => {
    const suffix = reservedSuffixOf(name);
    if (suffix !== undefined) context.addIssue({ code: 'custom', message: `${JSON.stringify(name)} ends in ${suffix}, which names another table's state, spec or index` });
  });
const Host = z.string().min(1).max(253).regex(/^[A-Za-z0-9.-]+$|^\[[0-9A-Fa-f:.]+\]$/, 'a host name or address');
const Port = z.coerce.number().int().min(1).max(65_535);
const SslMode = z.enum(['disable', 'require', 'verify-full']);
const Flag = z.enum(['true', 'false', '1', '0']).transform((value) => value === 'true' || value === '1');

const PostgresParts = z.strictObject({
  user: z.string().min(1).max(63),
  password: z.string().max(1_000).optional(),
  host: Host,
  port: Port,
  database: z.string().regex(/^[A-Za-z0-9_$-]{1,63}$/, 'a database name'),
  table: Name.optional(),
  sslmode: SslMode.optional(),
  sslrootcert: z.string().min(1).max(4_096).optional(),
});

const ServerParts = z.strictObject({ host: Host, port: Port, collection: Name.optional(), ssl: Flag.optional(), tenant: z.string().max(256).optional(), database: z.string().max(256).optional() });

function parse<T extends z.ZodType>(schema: T, value: unknown, form: string): z.output<T> {
  const parsed = schema.safeParse(value);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw invalid(`${form}: ${issue === undefined ? 'invalid' : `${issue.path.join('.') || 'value'}: ${issue.message}`}`);
  }
  return parsed.data;
}

function query(url: URL, allowed: readonly string[], form: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, value] of url.searchParams) {
    if (!allowed.includes(key)) throw invalid(`${form}: unknown parameter ${JSON.stringify(key)} (known: ${allowed.join(', ') || 'none'})`);
    out[key] = value;
  }
  return out;
}

function url(uri: string): URL {
  try {
    return new URL(uri);
  } catch {
    throw invalid(`${JSON.stringify(redactUri(uri))} is not a valid URI`);
  }
}

function pgConnection(parts: z.output<typeof PostgresParts>, credentials: SinkCredentials): PgConnection {
  const mode = parts.sslmode ?? parse(SslMode.optional(), credentials.pgSslMode, 'PGSSLMODE') ?? 'disable';
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

/** LanceDB (with apache-arrow, the heaviest import of all) on first use; its table rule checked now. */
function lanceDb(dir: string, table: string): Sink {
  checkLanceDbTableName(table);
  return new LazySink(async () => new (await import('./lancedb.js')).LanceDbSink({ dir, table }));
}

/** The backend and its options, without connecting (exported for tests of the URI forms). */
/**
 * The local folder an index lives in (a plain folder, `lancedb://DIR`, `file:///DIR`), absolute;
 * null for a server or bucket. `shoal ingest .` must not walk into its own index.
 */
export function localIndexDir(uriOrDir: string): string | null {
  const scheme = uriScheme(uriOrDir);
  try {
    if (scheme === undefined) return resolve(uriOrDir);
    if (scheme === 'lancedb') return resolve(decodeURIComponent(uriOrDir.slice('lancedb://'.length).split('?', 1)[0] ?? ''));
    if (scheme === 'file') {
      const parsed = new URL(uriOrDir);
      parsed.search = '';
      return fileURLToPath(parsed);
    }
  } catch {
    // A malformed URI: openSink names the problem.
  }
  return null;
}

export function openSink(uriOrDir: string, options: OpenSinkOptions = {}): OpenedSink {
  const credentials = options.credentials ?? {};
  const fallbackTable = options.table ?? 'chunks';
  const display = redactUri(uriOrDir);
  const scheme = uriScheme(uriOrDir);
  const wrap = (sink: Sink, backend: SinkBackend, table: string, openAdmin: () => Promise<IndexAdmin>): OpenedSink => ({
    sink: new RetryingSink(sink, backend, options.retry, options.observer),
    backend,
    display,
    table,
    openAdmin,
  });
  const lanceAdmin = (dir: string) => async (): Promise<IndexAdmin> => new (await import('./lancedb-admin.js')).LanceDbAdmin({ dir });
  if (uriOrDir.trim() === '') throw invalid('empty');
  if (scheme === undefined) {
    return wrap(lanceDb(uriOrDir, fallbackTable), 'lancedb', fallbackTable, lanceAdmin(uriOrDir));
  }
  switch (scheme) {
    case 'lancedb': {
      const rest = uriOrDir.slice('lancedb://'.length);
      const [dir = '', search = ''] = rest.split('?', 2);
      const params = query(new URL(`x://x/?${search}`), ['table'], 'lancedb://DIR[?table=T]');
      if (dir === '') throw invalid('lancedb://DIR needs a folder');
      const table = params.table ?? fallbackTable;
      return wrap(lanceDb(decodeURIComponent(dir), table), 'lancedb', table, lanceAdmin(decodeURIComponent(dir)));
    }
    case 'postgres':
    case 'postgresql': {
      const parsed = url(uriOrDir);
      const params = query(parsed, ['table', 'sslmode', 'sslrootcert'], 'postgres://user@host:port/db?table=T');
      const parts = parse(PostgresParts, {
        user: decodeURIComponent(parsed.username) || undefined,
        ...(parsed.password === '' ? {} : { password: decodeURIComponent(parsed.password) }),
        host: parsed.hostname,
        port: parsed.port === '' ? 5432 : parsed.port,
        database: decodeURIComponent(parsed.pathname.replace(/^\//, '')) || undefined,
        ...params,
      }, 'postgres://user@host:port/db?table=T');
      const table = parts.table ?? parse(Name, fallbackTable, 'table');
      const pgOptions = { connection: pgConnection(parts, credentials), table: checkTableName(table), ...(options.batchRows === undefined ? {} : { batchRows: options.batchRows }) };
      const pgAdmin = async (): Promise<IndexAdmin> => new (await import('./pgvector-admin.js')).PgVectorAdmin({ connection: pgOptions.connection });
      return wrap(new LazySink(async () => new (await import('./pgvector.js')).PgVectorSink(pgOptions)), 'pgvector', table, pgAdmin);
    }
    case 'chroma':
    case 'qdrant': {
      const parsed = url(uriOrDir);
      const form = `${scheme}://host:port/COLLECTION`;
      if (parsed.username !== '' || parsed.password !== '') throw invalid(`${form}: put the API key in ${scheme === 'chroma' ? 'CHROMA_API_KEY' : 'QDRANT_API_KEY'}, not in the URI`);
      const params = query(parsed, scheme === 'chroma' ? ['ssl', 'tenant', 'database'] : ['ssl'], form);
      const parts = parse(ServerParts, {
        host: parsed.hostname,
        port: parsed.port === '' ? (scheme === 'chroma' ? 8000 : 6333) : parsed.port,
        collection: decodeURIComponent(parsed.pathname.replace(/^\//, '')) || undefined,
        ...params,
      }, form);
      const collection = parts.collection ?? parse(Name, fallbackTable, 'collection');
      const batch = options.batchRows === undefined ? {} : { batchRows: options.batchRows };
      const timeout = credentials.storeTimeoutMs === undefined ? {} : { requestTimeoutMs: credentials.storeTimeoutMs };
      if (scheme === 'chroma') {
        const apiKey = credentials.chromaApiKey;
        const chromaOptions: ChromaSinkOptions = {
          host: parts.host, port: parts.port, ssl: parts.ssl ?? false, collection: checkTableName(collection), ...batch, ...timeout,
          tenant: parts.tenant ?? credentials.chromaTenant, database: parts.database ?? credentials.chromaDatabase,
          ...(apiKey === undefined ? {} : { headers: { 'x-chroma-token': apiKey } }),
        };
        const chromaAdmin = async (): Promise<IndexAdmin> => new (await import('./chroma-admin.js')).ChromaAdmin(chromaOptions);
        return wrap(new LazySink(async () => new (await import('./chroma.js')).ChromaSink(chromaOptions)), 'chroma', collection, chromaAdmin);
      }
      const qdrantOptions = { host: parts.host, port: parts.port, https: parts.ssl ?? false, apiKey: credentials.qdrantApiKey, collection: checkTableName(collection), ...batch, ...timeout };
      const qdrantAdmin = async (): Promise<IndexAdmin> => new (await import('./qdrant-admin.js')).QdrantAdmin(qdrantOptions);
      return wrap(new LazySink(async () => new (await import('./qdrant.js')).QdrantSink(qdrantOptions)), 'qdrant', collection, qdrantAdmin);
    }
    case 'file': {
      const parsed = url(uriOrDir);
      const params = query(parsed, ['table'], 'file:///dir');
      if (parsed.host !== '') throw invalid('file:///dir takes an absolute path (three slashes)');
      const table = parse(Name, params.table ?? fallbackTable, 'file:// table');
      parsed.search = '';
      const fileDir = fileURLToPath(parsed);
      return wrap(new JsonlSink({ dir: fileDir, table }), 'file', table, async () => new (await import('./jsonl-admin.js')).JsonlAdmin({ dir: fileDir }));
    }
    case 's3': {
      // JSON objects under the prefix, exact search (adapters/sinks/s3.ts); `?table=` wins over --table.
      const at = uriOrDir.indexOf('?');
      const base = at === -1 ? uriOrDir : uriOrDir.slice(0, at);
      const params = at === -1 ? {} : query(new URL(`x://x/?${uriOrDir.slice(at + 1)}`), ['table'], 's3://bucket/prefix[?table=T]');
      const table = parse(Name, params.table ?? fallbackTable, 's3 table');
      return wrap(new S3Sink({ uri: base, table, s3: options.s3 ?? {} }), 's3', table, async () => new (await import('./s3-admin.js')).S3Admin({ uri: base, s3: options.s3 ?? {} }));
    }
    default:
      throw invalid(`unknown scheme ${JSON.stringify(`${scheme}://`)}`);
  }
}
