/**
 * The one interface every index backend implements (LanceDB today; pgvector, Chroma, Qdrant,
 * S3 and file sinks later). A sink stores chunk rows with their vectors, a small per-source
 * state (what was ingested from where, with which settings) and the index's own metadata
 * (model, dimension, distance), so `shoal search` needs no flags ingest already knew.
 */

export type Distance = 'cosine' | 'l2' | 'dot';

/** Optional columns, present only when the pipeline stage that fills them runs. */
export type OptionalColumn = 'entities' | 'labels';

export interface TableSpec {
  /** Vector length: the encoder's dimension. */
  dimension: number;
  distance: Distance;
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
  /** Stored where the backend has sparse vectors (pgvector `sparsevec`, Qdrant, file); ignored elsewhere. */
  sparse?: SparseValues | null | undefined;
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
  /** A where-clause over metadata columns, already validated by `validateFilter`. */
  filter?: string | undefined;
}

export interface SearchHit {
  row: Omit<ChunkRow, 'vector' | 'sparse'>;
  /** Similarity, higher is better (cosine similarity, negated L2 distance or dot product). */
  score: number;
}

export interface Sink {
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
  count(filter?: string): Promise<number>;
  search(vector: readonly number[], options: SearchOptions): Promise<SearchHit[]>;
  /** After a run: builds or refreshes whatever index the backend needs (an ANN index once the table is large). */
  optimize(): Promise<void>;
  close(): Promise<void>;
}

/** Columns a `--filter` expression may name (every stored column but the vector). */
export const FILTER_COLUMNS: readonly string[] = Object.freeze([
  'id', 'document_id', 'source', 'page', 'chunk', 'text', 'start', 'end', 'heading', 'settings', 'entities', 'labels', 'ingested_at',
]);
