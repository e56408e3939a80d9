import { existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import * as lancedb from '@lancedb/lancedb';
import { Field, FixedSizeList, Float16, Float32, Int32, Schema, Uint8, Utf8 } from 'apache-arrow';
import { z } from 'zod';
import { ErrorCode, isShoalError, ShoalError } from '../../protocol/errors.js';
import { EmbeddingDtype } from '../../protocol/output-types.js';
import { sqlString, sqlStringList } from '../shared/filter.js';
import { candidateCount, checkLanceDbTableName, checkRowTypes, checkSpec, rankTyped, vectorTypeOf } from '../shared/table-spec.js';
import { checkVectorType, fromUnsignedBytes, isBinaryType, unsignedBytes } from '../shared/vector-types.js';
import type { ChunkRow, Distance, DocumentState, OptionalColumn, SearchHit, SearchOptions, Store, SparseValues, TableSpec, MultivectorSearchOptions, QueryVector } from '../store.js';
import { extraVectorFields, hitColumns, searchMultivectorColumn, searchSparseColumns } from './vectors.js';
import { hasMetadataColumn, METADATA_COLUMN, metadataField, noMetadataColumn, rowsAsArrow } from './metadata.js';
import { lanceFilter } from './filter.js';
import { namesMetadata } from '../shared/filter-metadata.js';
import { metadataText } from '../shared/row-metadata.js';
import { makeDirectory } from '../../support/directories.js';
import { refreshTextIndex, searchTextColumn } from './text.js';
import { winnerRows } from './winners.js';

/**
 * The default index: LanceDB embedded in a folder (no server). Chunks live in the named table,
 * per-source state in `<table>__documents`, and the table spec in the chunk table's schema metadata.
 */

/** Rows in one mergeInsert: bounds memory and keeps each write one LanceDB version. */
const UPSERT_BATCH_ROWS = 4_096;
/**
 * Rows from which the table gets its IVF-PQ index. LanceDB's flat scan costs about 2.5 ms per
 * 1,000 rows of 384-d cosine vectors on 2 cores (store.search p50: 42 ms at 10k rows, 66 ms at
 * 20k, 141 ms at 50k, 252 ms at 99k), while the index answered in 17-27 ms at every size measured
 * with recall@10 1.0 (bench/lance-index-threshold.ts, docs/benchmarks.md). Its build costs about
 * 1.1 s per 1,000 rows once (24 s at 20k), so below 20k, where the scan still answers within tens
 * of milliseconds, none is built; IVF-PQ training also wants a few hundred rows per partition.
 */
export const VECTOR_INDEX_MIN_ROWS = 20_000;

const META_PREFIX = 'shoal.';

export interface LanceDbStoreOptions {
  /** Folder of the LanceDB database (created if missing). */
  dir: string;
  /** @default 'chunks' */
  table?: string;
  /** Rows from which an ANN index is built. @default VECTOR_INDEX_MIN_ROWS */
  vectorIndexMinRows?: number;
}

const StoredSpec = z.object({
  dimension: z.coerce.number().int().positive(),
  distance: z.enum(['cosine', 'l2', 'dot']),
  /** Absent in tables written before output types: float32. */
  vectorType: EmbeddingDtype.default('float32'),
  optionalColumns: z.string().transform((value) => value.split(',').filter((part): part is OptionalColumn => part === 'entities' || part === 'labels' || part === 'sparse' || part === 'multivector')),
});

const StateRow = z.object({
  source: z.string(),
  document_id: z.string(),
  settings: z.string(),
  chunks: z.number(),
  pages: z.number(),
  ingested_at: z.string(),
});

const utf8 = (name: string, nullable = false): Field => new Field(name, new Utf8(), nullable);
const int32 = (name: string): Field => new Field(name, new Int32(), false);

/**
 * The vector column's item type: float16 as Arrow Float16 (half the bytes), the binary types as
 * their packed bytes (UInt8, searched by LanceDB's Hamming distance), float32 and the 8-bit codes
 * as Float32 (LanceDB's vector search reads float lists; the codes are exact in them).
 */
function vectorItemType(spec: TableSpec): Float16 | Float32 | Uint8 {
  const type = vectorTypeOf(spec);
  if (type === 'float16') return new Float16();
  return isBinaryType(type) ? new Uint8() : new Float32();
}

/** A vector of the table's type as the vector column takes it (binary: unsigned bytes). */
function columnValues(values: ArrayLike<number>, spec: TableSpec): number[] {
  const type = vectorTypeOf(spec);
  return isBinaryType(type) ? Array.from(unsignedBytes(values, type)) : Array.from(values);
}

function chunkSchema(spec: TableSpec): Schema {
  const metadata = new Map<string, string>([
    [`${META_PREFIX}dimension`, String(spec.dimension)],
    [`${META_PREFIX}distance`, spec.distance],
    [`${META_PREFIX}vectorType`, vectorTypeOf(spec)],
    [`${META_PREFIX}optionalColumns`, spec.optionalColumns.join(',')],
    ...Object.entries(spec.metadata).map(([key, value]): [string, string] => [`${META_PREFIX}meta.${key}`, value]),
  ]);
  const fields = [
    utf8('id'), utf8('document_id'), utf8('source'), int32('page'), int32('chunk'), utf8('text'),
    int32('start'), int32('end'), utf8('heading', true), utf8('settings'),
    new Field('vector', new FixedSizeList(spec.dimension, new Field('item', vectorItemType(spec), true)), false),
    ...spec.optionalColumns.filter((column) => column === 'entities' || column === 'labels').map((column) => utf8(column, true)),
    ...extraVectorFields(spec),
    utf8('ingested_at'),
    metadataField(),
  ];
  return new Schema(fields, metadata);
}

const STATE_SCHEMA = new Schema([utf8('source'), utf8('document_id'), utf8('settings'), int32('chunks'), int32('pages'), utf8('ingested_at')]);


/** Seconds between checks for versions other processes committed: 0 = before every read (test/integration/index-freshness.test.ts). */
const READ_CONSISTENCY_INTERVAL_S = 0;

/**
 * The search settings once a table has its IVF-PQ index, measured at 1M rows of 384-d vectors
 * (docs/benchmarks.md "Search at scale"): with PQ codes of 4 dimensions (pqSubVectors) 40 of the
 * ~1,000 partitions (LanceDB's default partitioning, √rows) reach recall@10 0.98, 20 reach 0.92,
 * and 64 add 20 ms for 0.985. Each probed partition costs about 1 ms on 2 cores.
 */
const SEARCH_NPROBES = 40;
/** PQ candidates re-ranked by LanceDB on the full vectors, as a multiple of the limit (2: recall 0.91 → 4: 0.98 at 1M). */
const SEARCH_REFINE = 4;
/**
 * Rows a vector search asks LanceDB for beyond k before ranking them exactly here. Every row
 * returned is read at random from the table (about 1.3 ms per row with its vector at 1M rows),
 * so the over-fetch the other backends do (`candidateCount`: 100 for k 10) cost 80 ms a query
 * here; LanceDB's own refine already ranks its candidates on the full vectors, so a margin for
 * float32 near-ties is enough.
 */
const SEARCH_MARGIN = 10;

/**
 * k-means iterations when the index is trained (LanceDB's default is 50). With 4-d PQ codes the
 * 96 codebooks' k-means ran all 50: the build took 389 s at 100k rows and 454 s at 1M; with 10,
 * 88 s and 164 s (LanceDB's default index took 77 s and 159 s), recall@10 unchanged (1.0 at 100k,
 * 0.985 at 1M; docs/benchmarks.md "Search at scale").
 */
const KMEANS_ITERATIONS = 10;

/**
 * PQ sub-vectors for a float vector of `dimension` values: one per 4 dimensions where it divides
 * (96 for 384-d), else LanceDB's default (one per 16). At 1M rows recall@10 was 0.36 (isotropic
 * set) and 0.82 (shaped set of bench/search.ts) with LanceDB's default codes, 0.985 with 4-d
 * codes (docs/benchmarks.md "Search at scale").
 */
export function pqSubVectors(dimension: number): number | undefined {
  return dimension % 4 === 0 && dimension >= 16 ? dimension / 4 : undefined;
}

/** The vector column of a returned row (an Arrow vector of float32). */
const VectorColumn = z
  .custom<Iterable<number>>((value) => typeof value === 'object' && value !== null && Symbol.iterator in value, 'a vector column')
  .transform((value) => Float32Array.from(value));

/** A search candidate as the first read returns it: enough to rank it, and its address for the second. */
const CandidateRow = z.object({ id: z.string(), _rowid: z.bigint(), vector: VectorColumn });

/**
 * A filter naming a column this table was made without (`labels` when the pipeline had no
 * classify stage) is the caller's mistake, said as such; LanceDB answered with a schema error and
 * a Rust backtrace.
 */
function checkFilterColumns(filter: string, spec: TableSpec): void {
  for (const [, column] of filter.matchAll(/`([A-Za-z_][A-Za-z0-9_]*)`/g)) {
    if ((column === 'entities' || column === 'labels') && !spec.optionalColumns.includes(column)) {
      const stage = column === 'entities' ? 'an extract' : 'a classify';
      throw new ShoalError(ErrorCode.INVALID_INPUT, `filter: this index has no ${column} column (it is written when the pipeline has ${stage} stage)`, { details: { field: 'filter' } });
    }
  }
}

/** LanceDB's error without its Rust source locations and causes: the first sentence, bounded. */
function briefLanceError(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  const first = message.split('\n', 1)[0] ?? '';
  const brief = first.replace(/,?\s*\/[^\s,]*\.rs:\d+:\d+/g, '').replace(/\s*Caused by:.*$/s, '').trim();
  return brief.length > 300 ? `${brief.slice(0, 300)}…` : brief;
}

export class LanceDbStore implements Store {
  readonly #dir: string;
  readonly #tableName: string;
  #preparing: Promise<void> = Promise.resolve();
  readonly #vectorIndexMinRows: number;
  #db: lancedb.Connection | null = null;
  #chunks: lancedb.Table | null = null;
  #documents: lancedb.Table | null = null;
  #spec: TableSpec | null = null;
  /** Whether the chunk table has the metadata column (tables made before metadata have none; lancedb/metadata.ts). */
  #hasMetadata = true;

  constructor(options: LanceDbStoreOptions) {
    this.#dir = options.dir;
    this.#tableName = options.table ?? 'chunks';
    this.#vectorIndexMinRows = options.vectorIndexMinRows ?? VECTOR_INDEX_MIN_ROWS;
    checkLanceDbTableName(this.#tableName);
  }

  /** The database; null when it does not exist and `create` is false (reading never creates the folder). */
  async #connection(create: boolean): Promise<lancedb.Connection | null> {
    if (this.#db === null) {
      if (!create && !existsSync(this.#dir)) return null;
      // A file where the folder should be (a mistyped --index) is the caller's mistake, not EEXIST from mkdir.
      if (existsSync(this.#dir) && !statSync(this.#dir).isDirectory()) {
        throw new ShoalError(ErrorCode.CONFIG_INVALID, `index ${this.#dir} is a file, not a folder: a LanceDB index is a folder (created when missing)`);
      }
      await makeDirectory(this.#dir).catch((error: unknown) => {
        throw new ShoalError(ErrorCode.CONFIG_INVALID, `cannot create the index folder ${this.#dir}`, { cause: error });
      });
      // Every read first checks for a newer table version: a sink held open (the results sink, a
      // library user) must see rows and states other processes committed since it opened the
      // table; LanceDB's default never checks, and a held table kept answering its first version.
      // Writes are consistent either way. On a local folder the check costs one manifest lookup.
      this.#db = await lancedb.connect(this.#dir, { readConsistencyInterval: READ_CONSISTENCY_INTERVAL_S });
    }
    return this.#db;
  }

  async #open(): Promise<{ chunks: lancedb.Table; documents: lancedb.Table } | null> {
    if (this.#chunks === null) {
      // Reading must not write: connecting to a folder makes LanceDB add its `__manifest` there,
      // so a folder without the table's own `<table>.lance` (`shoal search --index docs/`, a
      // mistyped path) is answered without connecting, and left as it was.
      if (!existsSync(join(this.#dir, `${this.#tableName}.lance`))) {
        // A file where the folder should be (a mistyped --index) is named as such, never connected to.
        if (existsSync(this.#dir) && !statSync(this.#dir).isDirectory()) await this.#connection(false);
        return null;
      }
      const db = await this.#connection(false);
      if (db === null || !(await db.tableNames()).includes(this.#tableName)) return null;
      this.#chunks = await db.openTable(this.#tableName);
    }
    return { chunks: this.#chunks, documents: await this.#documentsTable() };
  }

  /** The state table exists on its own: documents without any text have a state but no rows. */
  async #documentsTable(): Promise<lancedb.Table> {
    if (this.#documents === null) {
      const db = await this.#connection(true);
      if (db === null) throw new ShoalError(ErrorCode.INTERNAL, `cannot open ${this.#dir}`);
      this.#documents = await db.createEmptyTable(`${this.#tableName}__documents`, STATE_SCHEMA, { mode: 'create', existOk: true });
    }
    return this.#documents;
  }

  async #tables(): Promise<{ chunks: lancedb.Table; documents: lancedb.Table }> {
    const tables = await this.#open();
    if (tables === null) throw new ShoalError(ErrorCode.NOT_FOUND, `no table ${JSON.stringify(this.#tableName)} in ${this.#dir} (run shoal ingest first)`);
    return tables;
  }

  async describe(): Promise<TableSpec | null> {
    if (this.#spec !== null) return this.#spec;
    const tables = await this.#open();
    if (tables === null) return null;
    const schema = await tables.chunks.schema();
    this.#hasMetadata = hasMetadataColumn(schema);
    const metadata = schema.metadata;
    const stored = StoredSpec.safeParse({
      dimension: metadata.get(`${META_PREFIX}dimension`),
      distance: metadata.get(`${META_PREFIX}distance`),
      vectorType: metadata.get(`${META_PREFIX}vectorType`),
      optionalColumns: metadata.get(`${META_PREFIX}optionalColumns`) ?? '',
    });
    if (!stored.success) throw new ShoalError(ErrorCode.CONFIG_INVALID, `table ${this.#tableName} in ${this.#dir} was not written by shoal ingest`);
    const extra: Record<string, string> = {};
    for (const [key, value] of metadata) if (key.startsWith(`${META_PREFIX}meta.`)) extra[key.slice(`${META_PREFIX}meta.`.length)] = value;
    this.#spec = Object.freeze({ ...stored.data, metadata: Object.freeze(extra) });
    return this.#spec;
  }

  prepare(spec: TableSpec): Promise<void> {
    // One at a time in this process (two batches of a documents worker share the sink), and a
    // table another process created meanwhile is checked like one found at the start.
    const next = this.#preparing.then(() => this.#prepare(spec));
    this.#preparing = next.catch(() => undefined);
    return next;
  }

  async #prepare(spec: TableSpec): Promise<void> {
    const existing = await this.describe();
    if (existing === null) {
      const db = await this.#connection(true);
      if (db === null) throw new ShoalError(ErrorCode.INTERNAL, `cannot open ${this.#dir}`);
      try {
        this.#chunks = await db.createEmptyTable(this.#tableName, chunkSchema(spec), { mode: 'create', existOk: false });
      } catch (error) {
        if (!/already exists/i.test(String(error))) throw error;
        const created = await this.describe();
        if (created === null) throw error;
        checkSpec(created, spec, `table ${this.#tableName} in ${this.#dir}`);
        return;
      }
      this.#spec = Object.freeze({ ...spec, vectorType: vectorTypeOf(spec) });
      this.#hasMetadata = true;
      return;
    }
    checkSpec(existing, spec, `table ${this.#tableName} in ${this.#dir}`);
  }

  async states(sources: readonly string[]): Promise<Map<string, DocumentState>> {
    const out = new Map<string, DocumentState>();
    if (sources.length === 0 || (await this.#connection(false)) === null) return out;
    const documents = await this.#documentsTable();
    for (let at = 0; at < sources.length; at += 500) {
      const slice = sources.slice(at, at + 500);
      const rows: unknown[] = await documents.query().where(`source IN ${sqlStringList(slice)}`).toArray();
      for (const row of rows) {
        const state = StateRow.parse(row);
        out.set(state.source, state);
      }
    }
    return out;
  }

  async commit(rows: readonly ChunkRow[], states: readonly DocumentState[]): Promise<void> {
    if (states.length === 0) return;
    const documents = await this.#documentsTable();
    const tables = await this.#open();
    if (tables === null) {
      if (rows.length > 0) throw new ShoalError(ErrorCode.INTERNAL, `table ${this.#tableName} must be prepared before rows are written`);
      await documents.mergeInsert('source').whenMatchedUpdateAll().whenNotMatchedInsertAll().execute(states.map((state) => ({ ...state })));
      return;
    }
    const { chunks } = tables;
    const spec = await this.describe();
    checkRowTypes(rows, spec);
    const optional = spec?.optionalColumns ?? [];
    const tableSchema = this.#hasMetadata ? await chunks.schema() : null;
    for (let at = 0; at < rows.length; at += UPSERT_BATCH_ROWS) {
      const batch = rows.slice(at, at + UPSERT_BATCH_ROWS).map((row) => {
        const { sparse, ...dense } = row;
        const out: Record<string, unknown> = { ...dense, vector: spec === null ? Array.from(row.vector) : columnValues(row.vector, spec) };
        if (!optional.includes('entities')) delete out.entities;
        if (!optional.includes('labels')) delete out.labels;
        if (optional.includes('multivector')) out.multivector = row.multivector == null ? null : row.multivector.map((vector) => [...vector]);
        else delete out.multivector;
        if (optional.includes('sparse')) {
          out.sparse_indices = sparse == null ? null : [...sparse.indices];
          out.sparse_values = sparse == null ? null : [...sparse.values];
        }
        // A table made before metadata keeps its schema: its new rows go without (lancedb/metadata.ts).
        if (tableSchema === null) delete out[METADATA_COLUMN];
        else out[METADATA_COLUMN] = metadataText(row.metadata);
        return out;
      });
      await chunks.mergeInsert('id').whenMatchedUpdateAll().whenNotMatchedInsertAll().execute(tableSchema === null ? batch : rowsAsArrow(batch, tableSchema));
    }
    // Older versions of these sources: another content hash or other settings.
    const stale = states.map((state) => `(source = ${sqlString(state.source)} AND (document_id <> ${sqlString(state.document_id)} OR settings <> ${sqlString(state.settings)}))`);
    for (let at = 0; at < stale.length; at += 200) await chunks.delete(stale.slice(at, at + 200).join(' OR '));
    await documents.mergeInsert('source').whenMatchedUpdateAll().whenNotMatchedInsertAll().execute(states.map((state) => ({ ...state })));
  }

  async statesUnder(prefix: string): Promise<DocumentState[]> {
    if ((await this.#connection(false)) === null) return [];
    const documents = await this.#documentsTable();
    // Matched here rather than with SQL LIKE, whose wildcards would need escaping in every path;
    // the state table holds one small row per document.
    const rows: unknown[] = await documents.query().select(['source', 'document_id', 'settings', 'chunks', 'pages', 'ingested_at']).toArray();
    return rows.map((row) => StateRow.parse(row)).filter((state) => state.source.startsWith(prefix));
  }

  async remove(sources: readonly string[]): Promise<void> {
    if (sources.length === 0 || (await this.#connection(false)) === null) return;
    const tables = await this.#open();
    const documents = await this.#documentsTable();
    for (let at = 0; at < sources.length; at += 200) {
      const where = `source IN ${sqlStringList(sources.slice(at, at + 200))}`;
      // Rows before states: an interrupt in between leaves a state that the next prune finds again.
      await tables?.chunks.delete(where);
      await documents.delete(where);
    }
  }

  async count(filter?: string): Promise<number> {
    const tables = await this.#open();
    if (tables === null) return 0;
    await this.describe();
    return tables.chunks.countRows(this.#filter(filter));
  }

  /** A validated filter as LanceDB runs it: metadata fields translated (lancedb/filter.ts), refused on a table without metadata. */
  #filter(filter: string | undefined): string | undefined {
    if (filter === undefined || !namesMetadata(filter)) return filter;
    if (!this.#hasMetadata) throw noMetadataColumn(`table ${this.#tableName} in ${this.#dir}`);
    return lanceFilter(filter);
  }

  /**
   * Builds the ANN index once the table has VECTOR_INDEX_MIN_ROWS rows, or refreshes it with the
   * rows added since (LanceDB searches unindexed rows by flat scan until then).
   */
  async optimize(): Promise<void> {
    const tables = await this.#open();
    const spec = await this.describe();
    if (tables === null || spec === null) return;
    const { chunks } = tables;
    // A full-text index built by an earlier text search does not cover rows added since (lancedb/text.ts).
    await refreshTextIndex(chunks, join(this.#dir, this.#tableName));
    if ((await chunks.countRows()) < this.#vectorIndexMinRows) return;
    const indices = await chunks.listIndices();
    if (indices.some((index) => index.columns.includes('vector'))) {
      await chunks.optimize();
      return;
    }
    // Product quantization needs float vectors: the packed bits of a binary table get an IVF-flat index under Hamming distance.
    const subVectors = pqSubVectors(spec.dimension);
    const config = isBinaryType(vectorTypeOf(spec))
      ? lancedb.Index.ivfFlat({ distanceType: 'hamming' })
      : lancedb.Index.ivfPq({ distanceType: spec.distance, maxIterations: KMEANS_ITERATIONS, ...(subVectors === undefined ? {} : { numSubVectors: subVectors }) });
    await chunks.createIndex('vector', { config });
  }

  async search(queryVector: QueryVector, options: SearchOptions): Promise<SearchHit[]> {
    // The numbers this backend's client and scoring take: the store is the query vector's wire edge.
    const vector: readonly number[] = Array.isArray(queryVector) ? queryVector : Array.from(queryVector);
    const { chunks } = await this.#tables();
    const spec = await this.describe();
    if (spec === null) return [];
    // Over-fetched and ranked exactly here (as every backend does): below VECTOR_INDEX_MIN_ROWS the
    // scan is exact but in float32; above, IVF-PQ is approximate, so more partitions are probed
    // and the PQ candidates re-ranked on the full vectors (refine) before the exact ranking. By a
    // margin (SEARCH_MARGIN), not `candidateCount`, except for Hamming distances, whose whole
    // numbers tie often enough that the cut must fall where the other backends' does.
    const type = vectorTypeOf(spec);
    checkVectorType(vector, type, 'the query vector');
    // A binary table is searched by LanceDB's Hamming distance over the packed bytes (VectorQuery's
    // typing lists only the float distances, its runtime takes 'hamming' as Index.ivfFlat's does).
    const distanceType = (isBinaryType(type) ? 'hamming' : spec.distance) as Distance;
    // The column named: a multi-vector column of the same width would make LanceDB's choice ambiguous.
    let query = chunks
      .vectorSearch(columnValues(vector, spec))
      .column('vector')
      .distanceType(distanceType)
      .limit(isBinaryType(type) ? candidateCount(options.k) : options.k + SEARCH_MARGIN)
      .nprobes(SEARCH_NPROBES)
      .refineFactor(SEARCH_REFINE)
      // Candidates carry only what ranking needs; the k winners' other columns are read after
      // (winners.ts): reading text and metadata for every candidate cost a third of a query at 1M rows.
      .select(['id', 'vector', '_distance'])
      .withRowId();
    if (options.filter !== undefined) {
      checkFilterColumns(options.filter, spec);
      query = query.where(this.#filter(options.filter) ?? options.filter);
    }
    let rows: unknown[];
    try {
      rows = await query.toArray();
    } catch (error) {
      // Without the cause: its text is the whole Rust error, which the CLI and HTTP would show.
      throw new ShoalError(ErrorCode.INVALID_INPUT, `search failed: ${briefLanceError(error)}`);
    }
    const candidates = rows.map((raw) => {
      const { id, _rowid: rowId, vector: stored } = CandidateRow.parse(raw);
      return { row: { id, rowId }, vector: isBinaryType(type) ? fromUnsignedBytes(stored, type) : stored };
    });
    const best = rankTyped(spec, vector, candidates, options.k);
    const rowsById = await winnerRows(chunks, hitColumns(spec, this.#metadataColumns()), best.map((hit) => hit.row));
    return best.flatMap(({ row, score }) => {
      const full = rowsById.get(row.id);
      return full === undefined ? [] : [{ row: full, score }];
    });
  }

  /** An exact scan with the filter pushed down (lancedb/vectors.ts; its cost is documented there). */
  async searchSparse(query: SparseValues, options: SearchOptions): Promise<SearchHit[]> {
    const { chunks } = await this.#tables();
    const spec = await this.describe();
    return spec === null ? [] : searchSparseColumns(chunks, spec, query, { ...options, filter: this.#filter(options.filter) }, `table ${this.#tableName} in ${this.#dir}`, this.#metadataColumns());
  }

  /** LanceDB's own MaxSim over the multi-vector column (lancedb/vectors.ts). */
  async searchMultivector(query: readonly (readonly number[])[], options: MultivectorSearchOptions): Promise<SearchHit[]> {
    const { chunks } = await this.#tables();
    const spec = await this.describe();
    return spec === null ? [] : searchMultivectorColumn(chunks, spec, query, { ...options, filter: this.#filter(options.filter) }, `table ${this.#tableName} in ${this.#dir}`, this.#metadataColumns());
  }

  #metadataColumns(): string[] {
    return this.#hasMetadata ? [METADATA_COLUMN] : [];
  }

  /** BM25 over LanceDB's full-text index on `text`, built on first use and kept current (lancedb/text.ts). */
  async searchText(query: string, options: SearchOptions): Promise<SearchHit[]> {
    const { chunks } = await this.#tables();
    const spec = await this.describe();
    if (spec === null) return [];
    if (options.filter !== undefined) checkFilterColumns(options.filter, spec);
    try {
      return await searchTextColumn(chunks, join(this.#dir, this.#tableName), spec, query, { ...options, filter: this.#filter(options.filter) }, this.#metadataColumns());
    } catch (error) {
      if (isShoalError(error)) throw error;
      throw new ShoalError(ErrorCode.INVALID_INPUT, `full-text search of table ${this.#tableName} in ${this.#dir} failed: ${briefLanceError(error)}`);
    }
  }

  async close(): Promise<void> {
    this.#chunks?.close();
    this.#documents?.close();
    this.#db?.close();
    this.#chunks = null;
    this.#documents = null;
    this.#db = null;
  }
}
