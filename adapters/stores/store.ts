import type { DocumentMetadata } from '../protocol/metadata.js';
import type { EmbeddingDtype } from '../protocol/output-types.js';

/**
 * The one interface every index backend implements (LanceDB today; pgvector, Chroma, Qdrant,
 * S3 and file sinks later). A sink stores chunk rows with their vectors, a small per-source
 * state (what was ingested from where, with which settings) and the index's own metadata
 * (model, dimension, distance), so `shoal search` needs no flags ingest already knew.
 */

export type Distance = 'cosine' | 'l2' | 'dot';

/**
 * Optional columns, present only when the pipeline stage that fills them runs. `sparse` is the
 * row's sparse vector (the encode stage's `sparse` model): a table that has it answers
 * `searchSparse`, and search fuses it with the dense ranking. `multivector` holds the chunk's
 * token vectors (the encode stage's `multivector` model, ColBERT), used by search to rescore its
 * candidates by late interaction (`searchMultivector`); the spec's metadata records their length
 * (`multivector_dimension`).
 */
export type OptionalColumn = 'entities' | 'labels' | 'sparse' | 'multivector';

export interface TableSpec {
  /**
   * Values per stored vector: the encoder's dimension (or the `dimensions` asked for); for the
   * binary types the packed bytes, 8 dimensions each (shared/vector-types.ts).
   */
  dimension: number;
  distance: Distance;
  /**
   * Output type of the stored vectors (adapters/protocol/output-types.ts); rows and queries carry
   * the type's values. @default 'float32' (also what a spec stored without it means)
   */
  vectorType?: EmbeddingDtype | undefined;
  optionalColumns: readonly OptionalColumn[];
  /** Free-form facts stored with the table (the encode model, the pipeline name...). */
  metadata: Readonly<Record<string, string>>;
}

/** A sparse vector (SPLADE-style): term ids and weights, ids ascending, within `dimension`. */
export interface SparseValues {
  indices: readonly number[];
  values: readonly number[];
  dimension: number;
}

/** One chunk as stored. `entities` and `labels` are JSON strings (null when their stage did not run). */
export interface ChunkRow {
  id: string;
  document_id: string;
  source: string;
  page: number;
  chunk: number;
  text: string;
  start: number;
  end: number;
  heading: string | null;
  /** Hash of the settings that produced the row; rows of a source with another hash are stale. */
  settings: string;
  vector: Float32Array | number[];
  entities: string | null;
  labels: string | null;
  ingested_at: string;
  /** Present when the pipeline has a sparse model (the `sparse` optional column); Chroma refuses such tables. */
  sparse?: SparseValues | null | undefined;
  /** Token vectors, stored where the backend has multi-vectors (LanceDB, Qdrant); other backends refuse such tables. */
  multivector?: readonly (readonly number[])[] | null | undefined;
  /**
   * The document's metadata (adapters/protocol/metadata.ts), the same on each of its chunks;
   * filterable as `metadata.<field>` and returned with hits. Absent or null: none.
   */
  metadata?: DocumentMetadata | null | undefined;
}

/** What was last committed from a source; a document counts as ingested only once this row exists. */
export interface DocumentState {
  source: string;
  document_id: string;
  settings: string;
  chunks: number;
  pages: number;
  ingested_at: string;
}

export interface SearchOptions {
  k: number;
  /** A where-clause over stored columns and `metadata.<field>`, already validated by `validateFilter`. */
  filter?: string | undefined;
}

export interface MultivectorSearchOptions extends SearchOptions {
  /** Only these row ids (the candidates being rescored). */
  ids?: readonly string[] | undefined;
}

export interface SearchHit {
  row: Omit<ChunkRow, 'vector' | 'sparse' | 'multivector'>;
  /** Similarity, higher is better (cosine similarity, negated L2 distance or dot product). */
  score: number;
}

/** A query vector as the encoder gives it (Float32Array) or as a caller holds it (numbers). */
export type QueryVector = Float32Array | readonly number[];

export interface Store {
  /** Creates the table on first use, or checks that the existing one has this dimension and distance. */
  prepare(spec: TableSpec): Promise<void>;
  /** The stored spec, or null when the table does not exist yet. */
  describe(): Promise<TableSpec | null>;
  /** Committed state of these sources (absent: never committed). */
  states(sources: readonly string[]): Promise<Map<string, DocumentState>>;
  /**
   * Writes the rows of finished documents and then their states, in that order: an interrupt
   * between the two leaves rows whose state is missing, and the re-run rewrites the same ids.
   * Rows of the same sources that are not in `rows` (older content or settings) are deleted.
   */
  commit(rows: readonly ChunkRow[], states: readonly DocumentState[]): Promise<void>;
  /** States of every committed source whose uri starts with `prefix` (`shoal ingest --prune` looks for removed documents). */
  statesUnder(prefix: string): Promise<DocumentState[]>;
  /** Deletes every row of these sources, then their states (documents removed from their folder; idempotent). */
  remove(sources: readonly string[]): Promise<void>;
  count(filter?: string): Promise<number>;
  /**
   * The k rows nearest `vector`. A query vector stays a Float32Array from the model thread to
   * here; each backend turns it into its own wire or file form (a JSON array, a pgvector literal,
   * an Arrow list) as it sends it.
   */
  search(vector: QueryVector, options: SearchOptions): Promise<SearchHit[]>;
  /**
   * The k rows whose sparse vectors have the largest dot product with `query` (score = the dot
   * product, higher is better; rows without a sparse vector or sharing no term are left out).
   * UNSUPPORTED_OPERATION on backends without sparse vectors (Chroma).
   */
  searchSparse(query: SparseValues, options: SearchOptions): Promise<SearchHit[]>;
  /**
   * Late interaction: the k rows (among `ids` when given) with the largest MaxSim between the
   * query's token vectors and the row's (Σ over query vectors of the best cosine similarity; higher
   * is better). UNSUPPORTED_OPERATION on backends without multi-vectors.
   */
  searchMultivector(query: readonly (readonly number[])[], options: MultivectorSearchOptions): Promise<SearchHit[]>;
  /**
   * Full-text search over the chunk text: the k rows that best match the query's words (BM25 in
   * LanceDB, ts_rank in PostgreSQL; higher is better; rows sharing no word with the query are
   * left out). Optional: a backend that cannot rank by text (Chroma, Qdrant, the file sinks)
   * leaves it out, and `searchTextOf` (shared/text-search.ts) answers UNSUPPORTED_OPERATION for it.
   */
  searchText?(query: string, options: SearchOptions): Promise<SearchHit[]>;
  /** After a run: builds or refreshes whatever index the backend needs (an ANN index once the table is large). */
  optimize(): Promise<void>;
  close(): Promise<void>;
}

/** Columns a `--filter` expression may name (every stored column but the vector). */
export const FILTER_COLUMNS: readonly string[] = Object.freeze([
  'id', 'document_id', 'source', 'page', 'chunk', 'text', 'start', 'end', 'heading', 'settings', 'entities', 'labels', 'ingested_at',
]);
