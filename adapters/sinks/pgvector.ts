import pg from 'pg';
import pgvector from 'pgvector';
import { z } from 'zod';
import { ErrorCode, ShoalError } from '../protocol/errors.js';
import { filterToSql } from './filter-sql.js';
import { parseFilter } from './filter-tree.js';
import type { ChunkRow, Distance, DocumentState, MultivectorSearchOptions, SearchHit, SearchOptions, Sink, SparseValues, TableSpec } from './sink.js';
import { noMultivector, refuseMultivector } from './multivector.js';
import { checkSparseQuery, rankSparse } from './sparse.js';
import { bitLength, isBinaryType, packBits, unpackBits } from './vector-types.js';
import { candidateCount, checkQuery, checkRowTypes, checkSpec, checkTableName, existsMatching, freezeSpec, keptOptional, rankTyped, StoredSpec, storedSpecOf, toHitRow, toState } from './table-spec.js';

/**
 * PostgreSQL with pgvector through the `pg` driver. Per table name T: `T` (chunks, a `vector(N)`
 * column, `halfvec(N)` or `bit(8N)` by output type (pgForm), and a nullable `sparsevec` one), `T__documents` (per-source state) and `T__spec` (one
 * row: dimension, distance, optional columns, metadata). A commit is one transaction (upserts in
 * batches, the stale rows of its sources deleted, then the states), so a failure leaves nothing
 * half-written and the retry rewrites the same ids.
 */

export interface PgConnection {
  host: string;
  port: number;
  user: string;
  password?: string | undefined;
  database: string;
  /** false: plain TCP; otherwise TLS (`sslmode=require`: encrypted, certificate not checked; `verify-full`: checked against `ca` or the system roots). */
  ssl: false | { rejectUnauthorized: boolean; ca?: string | undefined };
}

export interface PgVectorSinkOptions {
  connection: PgConnection;
  /** @default 'chunks' */
  table?: string;
  /** Rows per INSERT statement. @default 500 */
  batchRows?: number;
  /** Rows from which `optimize()` builds the HNSW index (below, an exact scan, as LanceDB). @default 100_000 */
  vectorIndexMinRows?: number;
  /** Pool size. @default 4 */
  maxConnections?: number;
  /** Milliseconds to wait for a connection. @default 10_000 */
  connectTimeoutMs?: number;
}

/** Distance → (operator, HNSW operator class); the operator gives a distance, smaller is nearer. */
const OPERATORS: Readonly<Record<Distance, { op: string; ops: string }>> = {
  cosine: { op: '<=>', ops: 'vector_cosine_ops' },
  l2: { op: '<->', ops: 'vector_l2_ops' },
  dot: { op: '<#>', ops: 'vector_ip_ops' },
};

/** A `vector` column as text (`[0.1,-2,3e-05]`: each float32 as its shortest decimal). */
const VectorText = z.string().transform((text, context) => {
  const values = text.replace(/^\[|\]$/g, '').split(',').map(Number);
  if (values.some((value) => !Number.isFinite(value))) {
    context.addIssue({ code: 'custom', message: 'not a pgvector vector' });
    return z.NEVER;
  }
  return values;
});

/**
 * How a table's output type is stored: float32 and the 8-bit codes in `vector(d)` (the codes are
 * small integers, exact in float32), float16 in `halfvec(d)`, the binary types in `bit(d×8)`
 * searched by Hamming distance (`<~>`, HNSW `bit_hamming_ops`). `cast` is the SQL type of one value.
 */
interface PgVectorForm {
  column: string;
  cast: string;
  op: string;
  ops: string;
  toSql(values: ArrayLike<number>): string;
  /** The column read back as text (`vector::text`), as the type's values. */
  fromText(text: string): number[];
}

const BitText = z.string().regex(/^[01]*$/, 'not a pgvector bit string');

function pgForm(spec: TableSpec): PgVectorForm {
  const type = spec.vectorType ?? 'float32';
  if (isBinaryType(type)) {
    const bits = bitLength(spec.dimension);
    return {
      column: `bit(${bits})`,
      cast: `bit(${bits})`,
      op: '<~>',
      ops: 'bit_hamming_ops',
      toSql: (values) => unpackBits(values, type).join(''),
      fromText: (text) => packBits(Array.from(BitText.parse(text), Number), type),
    };
  }
  const { op, ops } = OPERATORS[spec.distance];
  const half = type === 'float16';
  return {
    column: `${half ? 'halfvec' : 'vector'}(${spec.dimension})`,
    cast: half ? 'halfvec' : 'vector',
    op,
    ops: half ? ops.replace(/^vector_/, 'halfvec_') : ops,
    toSql: (values) => pgvector.toSql(Array.from(values)),
    // float32 text read back as float32: a half value or a code comes back exactly.
    fromText: (text) => VectorText.parse(text).map(Math.fround),
  };
}

const HIT_COLUMNS = '"id", "document_id", "source", "page", "chunk", "text", "start", "end", "heading", "settings", "entities", "labels", "ingested_at"';

/** Network failures and server shutdowns are worth a retry; SQL errors are not. */
function classify(error: unknown, what: string): ShoalError {
  if (error instanceof ShoalError) return error;
  const code = typeof error === 'object' && error !== null && 'code' in error ? String(error.code) : '';
  const message = error instanceof Error ? error.message : String(error);
  const transient = /^(ECONNREFUSED|ECONNRESET|ETIMEDOUT|EPIPE|EAI_AGAIN|57P0[123]|08\d\d\d|53300|40001|40P01)$/.test(code) ||
    /Connection terminated|timeout exceeded|connection ended|Client has encountered a connection error/i.test(message);
  // Refused credentials, a missing database or an unknown host will not heal by waiting.
  const misconfigured = /^(28\d\d\d|28P01|3D000|ENOTFOUND)$/.test(code);
  const kind = transient ? ErrorCode.UNAVAILABLE : misconfigured ? ErrorCode.CONFIG_INVALID : ErrorCode.INTERNAL;
  return new ShoalError(kind, `pgvector ${what}: ${message}`, { cause: error });
}

export class PgVectorSink implements Sink {
  readonly #pool: pg.Pool;
  readonly #table: string;
  readonly #batchRows: number;
  readonly #vectorIndexMinRows: number;
  readonly #where: string;
  #spec: TableSpec | null = null;
  #stateReady = false;

  constructor(options: PgVectorSinkOptions) {
    this.#table = checkTableName(options.table ?? 'chunks');
    this.#batchRows = options.batchRows ?? 500;
    this.#vectorIndexMinRows = options.vectorIndexMinRows ?? 100_000;
    const { connection } = options;
    this.#where = `table ${this.#table} in postgres://${connection.host}:${connection.port}/${connection.database}`;
    this.#pool = new pg.Pool({
      host: connection.host,
      port: connection.port,
      user: connection.user,
      ...(connection.password === undefined ? {} : { password: connection.password }),
      database: connection.database,
      ssl: connection.ssl,
      max: options.maxConnections ?? 4,
      connectionTimeoutMillis: options.connectTimeoutMs ?? 10_000,
      idleTimeoutMillis: 10_000,
    });
    // An idle client whose server went away must not crash the process; the next query reconnects.
    this.#pool.on('error', () => undefined);
  }

  #name(suffix = ''): string {
    return `"${this.#table}${suffix}"`;
  }

  async #query<R extends pg.QueryResultRow>(what: string, text: string, params: unknown[] = []): Promise<pg.QueryResult<R>> {
    try {
      return await this.#pool.query<R>(text, params);
    } catch (error) {
      throw classify(error, what);
    }
  }

  async #transaction<T>(what: string, body: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    let client: pg.PoolClient;
    try {
      client = await this.#pool.connect();
    } catch (error) {
      throw classify(error, what);
    }
    let broken = false;
    // A server that goes away while this client is checked out emits 'error' on it: without a
    // listener that would crash the process; the failing query below reports it instead.
    const onError = (): void => {
      broken = true;
    };
    client.on('error', onError);
    try {
      await client.query('BEGIN');
      const out = await body(client);
      await client.query('COMMIT');
      return out;
    } catch (error) {
      try {
        await client.query('ROLLBACK');
      } catch {
        // The connection itself failed: it is discarded below instead of going back to the pool.
        broken = true;
      }
      throw classify(error, what);
    } finally {
      client.off('error', onError);
      client.release(broken);
    }
  }

  async #exists(suffix: string): Promise<boolean> {
    const result = await this.#query<{ found: string | null }>('lookup', 'SELECT to_regclass($1)::text AS found', [`"${this.#table}${suffix}"`]);
    return result.rows[0]?.found !== null && result.rows[0]?.found !== undefined;
  }

  async describe(): Promise<TableSpec | null> {
    if (this.#spec !== null) return this.#spec;
    if (!(await this.#exists('__spec'))) return null;
    const result = await this.#query<{ spec: unknown }>('describe', `SELECT spec FROM ${this.#name('__spec')} WHERE name = 'spec'`);
    const row = result.rows[0];
    if (row === undefined) return null;
    const parsed = StoredSpec.safeParse(row.spec);
    if (!parsed.success) throw new ShoalError(ErrorCode.CONFIG_INVALID, `${this.#where} was not written by shoal ingest`);
    this.#spec = freezeSpec(parsed.data);
    return this.#spec;
  }

  async #ensureStateTable(client: pg.PoolClient | pg.Pool): Promise<void> {
    if (this.#stateReady) return;
    await client.query(
      `CREATE TABLE IF NOT EXISTS ${this.#name('__documents')} (source text PRIMARY KEY, document_id text NOT NULL, settings text NOT NULL, ` +
        'chunks integer NOT NULL, pages integer NOT NULL, ingested_at text NOT NULL)',
    );
    this.#stateReady = true;
  }

  async prepare(spec: TableSpec): Promise<void> {
    refuseMultivector(spec, 'pgvector', this.#where);
    if (await existsMatching(() => this.describe(), spec, this.#where)) return;
    const stored = storedSpecOf(spec);
    await this.#transaction('create table', async (client) => {
      // Two ingests starting at once: the second waits here and then finds the table made.
      await client.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`shoal:${this.#table}`]);
      await client.query('CREATE EXTENSION IF NOT EXISTS vector');
      await client.query(`CREATE TABLE IF NOT EXISTS ${this.#name('__spec')} (name text PRIMARY KEY, spec jsonb NOT NULL)`);
      const found = await client.query<{ spec: unknown }>(`SELECT spec FROM ${this.#name('__spec')} WHERE name = 'spec'`);
      const row = found.rows[0];
      if (row !== undefined) {
        checkSpec(StoredSpec.parse(row.spec), spec, this.#where);
        return;
      }
      await client.query(
        `CREATE TABLE IF NOT EXISTS ${this.#name()} (id text PRIMARY KEY, document_id text NOT NULL, source text NOT NULL, page integer NOT NULL, ` +
          'chunk integer NOT NULL, text text NOT NULL, start integer NOT NULL, "end" integer NOT NULL, heading text, settings text NOT NULL, ' +
          `entities text, labels text, ingested_at text NOT NULL, vector ${pgForm(spec).column} NOT NULL, sparse sparsevec)`,
      );
      await client.query(`CREATE INDEX IF NOT EXISTS ${this.#name('__source')} ON ${this.#name()} (source)`);
      await this.#ensureStateTable(client);
      await client.query(`INSERT INTO ${this.#name('__spec')} (name, spec) VALUES ('spec', $1)`, [JSON.stringify(stored)]);
    });
    this.#spec = freezeSpec(spec);
  }

  async states(sources: readonly string[]): Promise<Map<string, DocumentState>> {
    const out = new Map<string, DocumentState>();
    if (sources.length === 0 || !(await this.#exists('__documents'))) return out;
    for (let at = 0; at < sources.length; at += 5_000) {
      const result = await this.#query('states', `SELECT * FROM ${this.#name('__documents')} WHERE source = ANY($1::text[])`, [sources.slice(at, at + 5_000)]);
      for (const raw of result.rows) {
        const state = toState(raw);
        out.set(state.source, state);
      }
    }
    return out;
  }

  async commit(rows: readonly ChunkRow[], states: readonly DocumentState[]): Promise<void> {
    if (states.length === 0) return;
    const spec = rows.length > 0 ? await this.describe() : null;
    if (rows.length > 0 && spec === null) throw new ShoalError(ErrorCode.INTERNAL, `${this.#where} must be prepared before rows are written`);
    checkRowTypes(rows, spec);
    await this.#transaction('commit', async (client) => {
      await this.#ensureStateTable(client);
      for (let at = 0; at < rows.length; at += this.#batchRows) await this.#upsert(client, rows.slice(at, at + this.#batchRows), spec);
      if (spec !== null || (await client.query<{ found: string | null }>('SELECT to_regclass($1)::text AS found', [`"${this.#table}"`])).rows[0]?.found != null) {
        // Older versions of these sources: another content hash or other settings.
        await client.query(
          `DELETE FROM ${this.#name()} AS t USING unnest($1::text[], $2::text[], $3::text[]) AS s(source, document_id, settings) ` +
            'WHERE t.source = s.source AND (t.document_id <> s.document_id OR t.settings <> s.settings)',
          [states.map((s) => s.source), states.map((s) => s.document_id), states.map((s) => s.settings)],
        );
      }
      await client.query(
        `INSERT INTO ${this.#name('__documents')} (source, document_id, settings, chunks, pages, ingested_at) ` +
          'SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::int[], $5::int[], $6::text[]) ' +
          'ON CONFLICT (source) DO UPDATE SET document_id = EXCLUDED.document_id, settings = EXCLUDED.settings, chunks = EXCLUDED.chunks, pages = EXCLUDED.pages, ingested_at = EXCLUDED.ingested_at',
        [states.map((s) => s.source), states.map((s) => s.document_id), states.map((s) => s.settings), states.map((s) => s.chunks), states.map((s) => s.pages), states.map((s) => s.ingested_at)],
      );
    });
  }

  async statesUnder(prefix: string): Promise<DocumentState[]> {
    if (!(await this.#exists('__documents'))) return [];
    const result = await this.#query('states', `SELECT * FROM ${this.#name('__documents')} WHERE starts_with(source, $1)`, [prefix]);
    return result.rows.map(toState);
  }

  async remove(sources: readonly string[]): Promise<void> {
    if (sources.length === 0 || !(await this.#exists('__documents'))) return;
    const rows = await this.#exists('');
    await this.#transaction('remove', async (client) => {
      if (rows) await client.query(`DELETE FROM ${this.#name()} WHERE source = ANY($1::text[])`, [sources]);
      await client.query(`DELETE FROM ${this.#name('__documents')} WHERE source = ANY($1::text[])`, [sources]);
    });
  }

  /** One statement per batch: each column travels as one array parameter, unnested server-side. */
  async #upsert(client: pg.PoolClient, batch: readonly ChunkRow[], spec: TableSpec | null): Promise<void> {
    const optional = spec?.optionalColumns ?? [];
    const kept = batch.map((row) => keptOptional(row, optional));
    const column = <T>(pick: (row: ChunkRow) => T): T[] => batch.map(pick);
    const form = pgForm(spec ?? { dimension: 1, distance: 'cosine', optionalColumns: [], metadata: {} });
    await client.query(
      `INSERT INTO ${this.#name()} (id, document_id, source, page, chunk, text, start, "end", heading, settings, entities, labels, ingested_at, vector, sparse) ` +
        'SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::int[], $5::int[], $6::text[], $7::int[], $8::int[], $9::text[], $10::text[], ' +
        `$11::text[], $12::text[], $13::text[], $14::${form.cast}[], $15::sparsevec[]) ` +
        'ON CONFLICT (id) DO UPDATE SET document_id = EXCLUDED.document_id, source = EXCLUDED.source, page = EXCLUDED.page, chunk = EXCLUDED.chunk, ' +
        'text = EXCLUDED.text, start = EXCLUDED.start, "end" = EXCLUDED."end", heading = EXCLUDED.heading, settings = EXCLUDED.settings, ' +
        'entities = EXCLUDED.entities, labels = EXCLUDED.labels, ingested_at = EXCLUDED.ingested_at, vector = EXCLUDED.vector, sparse = EXCLUDED.sparse',
      [
        column((r) => r.id), column((r) => r.document_id), column((r) => r.source), column((r) => r.page), column((r) => r.chunk),
        column((r) => r.text), column((r) => r.start), column((r) => r.end), column((r) => r.heading), column((r) => r.settings),
        kept.map((k) => k.entities), kept.map((k) => k.labels), column((r) => r.ingested_at),
        column((r) => form.toSql(r.vector)),
        column((r) => (r.sparse == null ? null : pgvector.toSql(new pgvector.SparseVector(sparseMap(r.sparse.indices, r.sparse.values), r.sparse.dimension)))),
      ],
    );
  }

  async #filter(filter: string | undefined, firstParam: number): Promise<{ sql: string; params: unknown[] }> {
    if (filter === undefined) return { sql: '', params: [] };
    const translated = filterToSql(parseFilter(filter), firstParam);
    return { sql: ` WHERE ${translated.sql}`, params: translated.params };
  }

  async count(filter?: string): Promise<number> {
    if (!(await this.#exists(''))) return 0;
    const where = await this.#filter(filter, 1);
    const result = await this.#query<{ n: string }>('count', `SELECT count(*) AS n FROM ${this.#name()}${where.sql}`, where.params);
    return Number(result.rows[0]?.n ?? 0);
  }

  async search(vector: readonly number[], options: SearchOptions): Promise<SearchHit[]> {
    const spec = await this.describe();
    if (spec === null) throw new ShoalError(ErrorCode.NOT_FOUND, `no ${this.#where} (run shoal ingest first)`);
    checkQuery(vector, spec, options.k);
    const form = pgForm(spec);
    const where = await this.#filter(options.filter, 3);
    const candidates = candidateCount(options.k);
    const result = await this.#transaction('search', async (client) => {
      // With the HNSW index built, pgvector returns at most ef_search rows, and fewer under a
      // filter unless the scan is iterative: both set for this query only.
      await client.query(`SET LOCAL hnsw.ef_search = ${Math.min(1_000, candidates)}`);
      await client.query("SET LOCAL hnsw.iterative_scan = 'strict_order'");
      return client.query<Record<string, unknown>>(
        `SELECT ${HIT_COLUMNS}, vector::text AS vector_text FROM ${this.#name()}${where.sql} ORDER BY vector ${form.op} $1::${form.cast} LIMIT $2`,
        [form.toSql(vector), candidates, ...where.params],
      );
    });
    // The scan is exact in float32 (and approximate with the HNSW index): the over-fetched
    // candidates are ranked by the one exact scoring every backend shares.
    const rows = result.rows.map((raw) => ({ row: toHitRow(raw), vector: form.fromText(String(raw.vector_text)) }));
    return rankTyped(spec, vector, rows, options.k);
  }

  async searchMultivector(_query: readonly (readonly number[])[], _options: MultivectorSearchOptions): Promise<SearchHit[]> {
    throw noMultivector('pgvector', this.#where);
  }

  /**
   * `<#>` (negative inner product) on the `sparsevec` column, an exact scan (no sparse index is
   * built). The store's candidates come back with their sparse vectors and are rescored in float64
   * by rankSparse (pgvector sums in float32), so every backend gives the same scores.
   */
  async searchSparse(query: SparseValues, options: SearchOptions): Promise<SearchHit[]> {
    const spec = await this.describe();
    if (spec === null) throw new ShoalError(ErrorCode.NOT_FOUND, `no ${this.#where} (run shoal ingest first)`);
    checkSparseQuery(query, options.k);
    const where = await this.#filter(options.filter, 3);
    const vector = pgvector.toSql(new pgvector.SparseVector(sparseMap(query.indices, query.values), query.dimension));
    const result = await this.#query<Record<string, unknown>>(
      'sparse search',
      // Rows without a sparse vector give NULL, which sorts last; rankSparse leaves them out.
      `SELECT ${HIT_COLUMNS}, sparse::text AS sparse FROM ${this.#name()}${where.sql} ORDER BY sparse <#> $1::sparsevec LIMIT $2`,
      [vector, candidateCount(options.k), ...where.params],
    );
    const candidates = result.rows.map((raw) => ({ row: toHitRow(raw), sparse: typeof raw.sparse === 'string' ? new pgvector.SparseVector(raw.sparse, undefined) : null }));
    return rankSparse(query, candidates, options.k);
  }

  /** The HNSW index once the table is large enough (below that an exact scan is fast and exact, as in LanceDB). */
  async optimize(): Promise<void> {
    const spec = await this.describe();
    if (spec === null || (await this.count()) < this.#vectorIndexMinRows) return;
    await this.#query('index', `CREATE INDEX IF NOT EXISTS ${this.#name('__hnsw')} ON ${this.#name()} USING hnsw (vector ${pgForm(spec).ops})`);
  }

  async close(): Promise<void> {
    await this.#pool.end().catch(() => undefined);
  }
}

/** pgvector's SparseVector takes a Map of index → value. */
function sparseMap(indices: readonly number[], values: readonly number[]): Map<number, number> {
  return new Map(indices.map((index, at) => [index, values[at] ?? 0]));
}
