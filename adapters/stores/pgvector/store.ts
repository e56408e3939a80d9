import type pg from 'pg';
import { ErrorCode, ShoalError } from '../../protocol/errors.js';
import { namesMetadata } from '../shared/filter-metadata.js';
import { filterToSql } from './filter.js';
import { parseFilter } from '../shared/filter-tree.js';
import type { ChunkRow, DocumentState, MultivectorSearchOptions, SearchHit, SearchOptions, Store, SparseValues, TableSpec, QueryVector } from '../store.js';
import { noMultivector, refuseMultivector } from '../shared/multivector.js';
import { DEFAULT_HNSW_BUILD } from './hnsw-defaults.js';
import { DEFAULT_QUERY_TIMEOUT_MS, longStatement, openPool, query, transaction, type PgConnection } from './pool.js';
import * as sql from './sql.js';
import { pgForm, sparseFromText, sparseToSql } from './vectors.js';
import { checkSparseQuery, rankSparse } from '../shared/sparse.js';
import { ensureTextVector, searchTextSql, textHits, type TextVectorSource } from './text.js';
import { checkTextQuery } from '../shared/text-search.js';
import { candidateCount, checkQuery, checkRowTypes, checkSpec, checkTableName, existsMatching, freezeSpec, rankTyped, StoredSpec, storedSpecOf, toHitRow, toState } from '../shared/table-spec.js';

export type { PgConnection } from './pool.js';

/**
 * PostgreSQL with pgvector through the `pg` driver. Per table name T: `T` (chunks, a `vector(N)`,
 * `halfvec(N)` or `bit(8N)` column by output type, and a nullable `sparsevec` one), `T__documents`
 * (per-source state) and `T__spec` (one row: dimension, distance, optional columns, metadata). A
 * commit is one transaction (upserts in batches, the stale rows of its sources deleted, then the
 * states), so a failure leaves nothing half-written and the retry rewrites the same ids.
 * This file is the Store; the SQL is pgvector/sql.ts's, the type mapping pgvector/vectors.ts's, the
 * pool and its error classing pgvector/pool.ts's.
 */

export interface PgVectorStoreOptions {
  connection: PgConnection;
  /** @default 'chunks' */
  table?: string;
  /** Rows per INSERT statement. @default 500 */
  batchRows?: number;
  /** Rows from which `optimize()` builds the HNSW index (below, an exact scan). @default HNSW_INDEX_MIN_ROWS */
  vectorIndexMinRows?: number;
  /** Pool size. @default 4 */
  maxConnections?: number;
  /**
   * HNSW candidate list per search (`hnsw.ef_search`, 1–1,000); never below the candidate count.
   * @default DEFAULT_EF_SEARCH
   */
  efSearch?: number;
  /** Milliseconds to wait for a connection. @default 10_000 */
  connectTimeoutMs?: number;
  /** HNSW graph links per node (pgvector `m`, 2–100), used when optimize() builds the index. @default DEFAULT_HNSW_BUILD.m */
  hnswM?: number;
  /** HNSW candidate list while building (pgvector `ef_construction`, 4–1,000, at least 2 × m). @default DEFAULT_HNSW_BUILD.efConstruction */
  hnswEfConstruction?: number;
  /** Milliseconds a query may wait for its answer (index builds excepted: pool.ts). @default DEFAULT_QUERY_TIMEOUT_MS */
  queryTimeoutMs?: number;
}

/** Rows from which the HNSW index is built at the end of a run: pgvector's exact scan answers below (not measured against the index under 100k rows here). */
export const HNSW_INDEX_MIN_ROWS = 100_000;

/**
 * HNSW candidate list per search when the URI sets none (`ef_search=`). 400, as Chroma's here: on
 * the bench's shaped 384-d set (bench/search.ts `--pg-ef-search`, PostgreSQL 15 + pgvector 0.8.6)
 * recall@10 was 0.867 / 0.973 / 0.997 at ef_search 100 / 400 / 1000 with 100k rows (store.search
 * p50 15 / 24 / 39 ms) and 0.666 / 0.889 / 0.962 with 1M rows (16 / 26 / 49 ms): 100, the candidate
 * count used before, lost a third of the true top 10 at 1M.
 */
export const DEFAULT_EF_SEARCH = 400;

export class PgVectorStore implements Store {
  readonly #pool: pg.Pool;
  readonly #table: string;
  readonly #t: sql.PgTableNames;
  readonly #batchRows: number;
  readonly #vectorIndexMinRows: number;
  readonly #efSearch: number;
  readonly #hnswBuild: sql.HnswBuild;
  readonly #where: string;
  #spec: TableSpec | null = null;
  #stateReady = false;
  /** Whether the chunk table has the metadata column (pgvector/sql.ts addMetadataColumn); null until looked up. */
  #metadataColumn: boolean | null = null;
  /** Where this table's tsvector comes from, once the first text search made sure of it (pgvector/text.ts). */
  #textVector: TextVectorSource | null = null;

  constructor(options: PgVectorStoreOptions) {
    this.#table = checkTableName(options.table ?? 'chunks');
    this.#t = sql.pgTableNames(this.#table);
    this.#batchRows = options.batchRows ?? 500;
    this.#vectorIndexMinRows = options.vectorIndexMinRows ?? HNSW_INDEX_MIN_ROWS;
    this.#efSearch = options.efSearch ?? DEFAULT_EF_SEARCH;
    this.#hnswBuild = { m: options.hnswM ?? DEFAULT_HNSW_BUILD.m, efConstruction: options.hnswEfConstruction ?? DEFAULT_HNSW_BUILD.efConstruction };
    const { connection } = options;
    this.#where = `table ${this.#table} in postgres://${connection.host}:${connection.port}/${connection.database}`;
    this.#pool = openPool(connection, options.maxConnections ?? 4, options.connectTimeoutMs ?? 10_000, options.queryTimeoutMs ?? DEFAULT_QUERY_TIMEOUT_MS);
  }

  #query<R extends pg.QueryResultRow>(what: string, text: string, params: unknown[] = []): Promise<pg.QueryResult<R>> {
    return query<R>(this.#pool, what, text, params);
  }

  #transaction<T>(what: string, body: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    return transaction(this.#pool, what, body);
  }

  /** Whether a relation (a quoted name of this.#t) exists. */
  async #exists(relation: string): Promise<boolean> {
    const result = await this.#query<{ found: string | null }>('lookup', sql.RELATION_EXISTS, [relation]);
    return result.rows[0]?.found !== null && result.rows[0]?.found !== undefined;
  }

  async describe(): Promise<TableSpec | null> {
    if (this.#spec !== null) return this.#spec;
    if (!(await this.#exists(this.#t.spec))) return null;
    const result = await this.#query<{ spec: unknown }>('describe', sql.selectSpec(this.#t));
    const row = result.rows[0];
    if (row === undefined) return null;
    const parsed = StoredSpec.safeParse(row.spec);
    if (!parsed.success) throw new ShoalError(ErrorCode.CONFIG_INVALID, `${this.#where} was not written by shoal ingest`);
    this.#spec = freezeSpec(parsed.data);
    return this.#spec;
  }

  async #hasMetadataColumn(): Promise<boolean> {
    this.#metadataColumn ??= (await this.#query('lookup', sql.METADATA_COLUMN_EXISTS, [this.#table])).rows.length > 0;
    return this.#metadataColumn;
  }

  async #ensureStateTable(client: pg.PoolClient | pg.Pool): Promise<void> {
    if (this.#stateReady) return;
    await client.query(sql.createStateTable(this.#t));
    this.#stateReady = true;
  }

  async prepare(spec: TableSpec): Promise<void> {
    refuseMultivector(spec, 'pgvector', this.#where);
    if (await existsMatching(() => this.describe(), spec, this.#where)) return;
    const stored = storedSpecOf(spec);
    await this.#transaction('create table', async (client) => {
      // Two ingests starting at once: the second waits here and then finds the table made.
      await client.query(sql.TABLE_LOCK, [`shoal:${this.#table}`]);
      await client.query(sql.CREATE_EXTENSION);
      await client.query(sql.createSpecTable(this.#t));
      const found = await client.query<{ spec: unknown }>(sql.selectSpec(this.#t));
      const row = found.rows[0];
      if (row !== undefined) {
        checkSpec(StoredSpec.parse(row.spec), spec, this.#where);
        return;
      }
      // Shoal creates its table and spec in this one transaction: a table of that name without a
      // spec is someone else's (an application's `documents`), which CREATE TABLE IF NOT EXISTS
      // would keep, every commit then failing on its columns. Refused before anything is written.
      // (Its state table may exist alone: a run whose documents gave no rows records their states.)
      const foreign = await client.query<{ found: string | null }>(sql.RELATION_EXISTS, [this.#t.chunks]);
      if (foreign.rows[0]?.found != null) {
        throw new ShoalError(ErrorCode.CONFIG_INVALID, `${this.#where} already exists and was not created by shoal ingest; use another --table or ?table=`);
      }
      await client.query(sql.createChunksTable(this.#t, pgForm(spec)));
      await client.query(sql.createSourceIndex(this.#t));
      await this.#ensureStateTable(client);
      await client.query(sql.insertSpec(this.#t), [JSON.stringify(stored)]);
    });
    this.#spec = freezeSpec(spec);
  }

  async states(sources: readonly string[]): Promise<Map<string, DocumentState>> {
    const out = new Map<string, DocumentState>();
    if (sources.length === 0 || !(await this.#exists(this.#t.documents))) return out;
    for (let at = 0; at < sources.length; at += 5_000) {
      const result = await this.#query('states', sql.selectStates(this.#t), [sources.slice(at, at + 5_000)]);
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
      // A table made before metadata gets its column on its first write (a cheap, nullable ALTER).
      if (rows.length > 0 && this.#metadataColumn !== true) {
        await client.query(sql.addMetadataColumn(this.#t));
        this.#metadataColumn = true;
      }
      for (let at = 0; at < rows.length; at += this.#batchRows) await this.#upsert(client, rows.slice(at, at + this.#batchRows), spec);
      if (spec !== null || (await client.query<{ found: string | null }>(sql.RELATION_EXISTS, [this.#t.chunks])).rows[0]?.found != null) {
        const stale = sql.deleteStale(this.#t, states);
        await client.query(stale.text, stale.params);
      }
      const upsert = sql.upsertStates(this.#t, states);
      await client.query(upsert.text, upsert.params);
    });
  }

  async statesUnder(prefix: string): Promise<DocumentState[]> {
    if (!(await this.#exists(this.#t.documents))) return [];
    const result = await this.#query('states', sql.selectStatesUnder(this.#t), [prefix]);
    return result.rows.map(toState);
  }

  async remove(sources: readonly string[]): Promise<void> {
    if (sources.length === 0 || !(await this.#exists(this.#t.documents))) return;
    const rows = await this.#exists(this.#t.chunks);
    await this.#transaction('remove', async (client) => {
      if (rows) await client.query(sql.deleteSources(this.#t.chunks), [sources]);
      await client.query(sql.deleteSources(this.#t.documents), [sources]);
    });
  }

  /** One statement per batch (pgvector/sql.ts upsertChunks). */
  async #upsert(client: pg.PoolClient, batch: readonly ChunkRow[], spec: TableSpec | null): Promise<void> {
    const form = pgForm(spec ?? { dimension: 1, distance: 'cosine', optionalColumns: [], metadata: {} });
    const upsert = sql.upsertChunks(this.#t, form, batch, spec);
    await client.query(upsert.text, upsert.params);
  }

  async #filter(filter: string | undefined, firstParam: number): Promise<{ sql: string; params: unknown[] }> {
    if (filter === undefined) return { sql: '', params: [] };
    if (namesMetadata(filter) && !(await this.#hasMetadataColumn())) throw new ShoalError(ErrorCode.INVALID_INPUT, `filter: ${this.#where} holds no document metadata yet (made before Shoal stored metadata, and not written since): ingest into it again to store metadata`, { details: { field: 'filter' } });
    const translated = filterToSql(parseFilter(filter), firstParam);
    return { sql: ` WHERE ${translated.sql}`, params: translated.params };
  }

  async count(filter?: string): Promise<number> {
    if (!(await this.#exists(this.#t.chunks))) return 0;
    const where = await this.#filter(filter, 1);
    const result = await this.#query<{ n: string }>('count', sql.countRows(this.#t, where.sql), where.params);
    return Number(result.rows[0]?.n ?? 0);
  }

  async search(query: QueryVector, options: SearchOptions): Promise<SearchHit[]> {
    // The numbers this backend's client and scoring take: the store is the query vector's wire edge.
    const vector: readonly number[] = Array.isArray(query) ? query : Array.from(query);
    const spec = await this.describe();
    if (spec === null) throw new ShoalError(ErrorCode.NOT_FOUND, `no ${this.#where} (run shoal ingest first)`);
    checkQuery(vector, spec, options.k);
    const form = pgForm(spec);
    const where = await this.#filter(options.filter, 3);
    const candidates = candidateCount(options.k);
    const withMetadata = await this.#hasMetadataColumn();
    const result = await this.#transaction('search', async (client) => {
      // With the HNSW index built, pgvector returns at most ef_search rows, and fewer under a
      // filter unless the scan is iterative: both set for this query only.
      await client.query(`SET LOCAL hnsw.ef_search = ${Math.min(1_000, Math.max(candidates, this.#efSearch))}`);
      await client.query("SET LOCAL hnsw.iterative_scan = 'strict_order'");
      return client.query<Record<string, unknown>>(sql.searchDense(this.#t, form, where.sql, withMetadata), [form.toSql(vector), candidates, ...where.params]);
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
    const result = await this.#query<Record<string, unknown>>(
      'sparse search',
      // Rows without a sparse vector give NULL, which sorts last; rankSparse leaves them out.
      sql.searchSparse(this.#t, where.sql, await this.#hasMetadataColumn()),
      [sparseToSql(query), candidateCount(options.k), ...where.params],
    );
    const candidates = result.rows.map((raw) => ({ row: toHitRow(raw), sparse: sparseFromText(raw.sparse) }));
    return rankSparse(query, candidates, options.k);
  }

  /** ts_rank over a stored tsvector column with a GIN index, both added by the first text search (pgvector/text.ts). */
  async searchText(query: string, options: SearchOptions): Promise<SearchHit[]> {
    const spec = await this.describe();
    if (spec === null) throw new ShoalError(ErrorCode.NOT_FOUND, `no ${this.#where} (run shoal ingest first)`);
    checkTextQuery(query, options.k);
    this.#textVector ??= await ensureTextVector((what, text, params) => this.#query(what, text, params), (what, body) => this.#transaction(what, body), this.#table, this.#t.chunks);
    const where = await this.#filter(options.filter, 3);
    const result = await this.#query<Record<string, unknown>>('text search', searchTextSql(this.#t.chunks, where.sql, this.#textVector, await this.#hasMetadataColumn()), [query, candidateCount(options.k), ...where.params]);
    return textHits(result.rows, options.k);
  }

  /** The HNSW index once the table is large enough (below that an exact scan is fast and exact, as in LanceDB). */
  async optimize(): Promise<void> {
    const spec = await this.describe();
    if (spec === null || (await this.count()) < this.#vectorIndexMinRows) return;
    await query(this.#pool, 'index', longStatement(sql.createHnswIndex(this.#t, pgForm(spec), this.#hnswBuild)));
  }

  async close(): Promise<void> {
    await this.#pool.end().catch(() => undefined);
  }
}
