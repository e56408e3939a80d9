import { z } from 'zod';
import { ErrorCode, ShoalError } from '../../protocol/errors.js';
import { EmbeddingDtype } from '../../protocol/output-types.js';
import { bitLength, checkVectorType, hammingDistance, hammingScore, isBinaryType } from './vector-types.js';
import type { ChunkRow, Distance, DocumentState, OptionalColumn, SearchHit, TableSpec } from '../store.js';
import { StoredMetadata } from './row-metadata.js';

/**
 * What the backends other than LanceDB share: the stored spec's shape, the mismatch check with
 * its message, the score convention, and the zod shapes rows and states are read back through.
 */

export const StoredSpec = z.object({
  dimension: z.number().int().positive().max(65_536),
  distance: z.enum(['cosine', 'l2', 'dot']),
  /** Absent in specs written before output types: those tables hold float32 vectors. */
  vectorType: EmbeddingDtype.default('float32'),
  optionalColumns: z.array(z.enum(['entities', 'labels', 'sparse', 'multivector'])).max(4),
  metadata: z.record(z.string(), z.string()),
});

/** The output type of a table's vectors (absent: float32). */
export function vectorTypeOf(spec: Pick<TableSpec, 'vectorType'>): EmbeddingDtype {
  return spec.vectorType ?? 'float32';
}

export function freezeSpec(spec: TableSpec): TableSpec {
  return Object.freeze({ ...spec, vectorType: vectorTypeOf(spec), optionalColumns: Object.freeze([...spec.optionalColumns]), metadata: Object.freeze({ ...spec.metadata }) });
}

/**
 * The opening of every backend's prepare(): true when the table already exists and matches the
 * spec (a mismatch throws, naming it), false when it has to be created.
 */
export async function existsMatching(describe: () => Promise<TableSpec | null>, spec: TableSpec, where: string): Promise<boolean> {
  const existing = await describe();
  if (existing === null) return false;
  checkSpec(existing, spec, where);
  return true;
}

/** The spec as stored beside a table: validated, with plain arrays. */
export function storedSpecOf(spec: TableSpec): z.infer<typeof StoredSpec> {
  return StoredSpec.parse({ ...spec, vectorType: vectorTypeOf(spec), optionalColumns: [...spec.optionalColumns] });
}

/** CONFIG_INVALID naming what differs (dimension, distance, vector type, missing columns), or nothing when the spec fits. */
export function checkSpec(existing: TableSpec, spec: TableSpec, where: string): void {
  const mismatches: string[] = [];
  if (existing.dimension !== spec.dimension) mismatches.push(`dimension ${existing.dimension} (the encoder gives ${spec.dimension})`);
  if (existing.distance !== spec.distance) mismatches.push(`distance ${existing.distance} (the pipeline asks ${spec.distance})`);
  if (vectorTypeOf(existing) !== vectorTypeOf(spec)) mismatches.push(`${vectorTypeOf(existing)} vectors (the pipeline asks ${vectorTypeOf(spec)})`);
  const missing = spec.optionalColumns.filter((column) => !existing.optionalColumns.includes(column));
  if (missing.length > 0) mismatches.push(`no ${missing.join('/')} column`);
  if (mismatches.length > 0) throw new ShoalError(ErrorCode.CONFIG_INVALID, `${where} has ${mismatches.join(', ')}; use another --table or --index`);
}

/** Optional columns a spec does not carry are stored as null, as LanceDB leaves them out. */
export function keptOptional(row: ChunkRow, columns: readonly OptionalColumn[]): { entities: string | null; labels: string | null } {
  return { entities: columns.includes('entities') ? row.entities : null, labels: columns.includes('labels') ? row.labels : null };
}

export const StateShape = z.object({
  source: z.string(),
  document_id: z.string(),
  settings: z.string(),
  chunks: z.coerce.number().int().nonnegative(),
  pages: z.coerce.number().int().nonnegative(),
  ingested_at: z.string(),
});

export function toState(raw: unknown): DocumentState {
  return StateShape.parse(raw);
}

export const HitShape = z.object({
  id: z.string(),
  document_id: z.string(),
  source: z.string(),
  page: z.coerce.number(),
  chunk: z.coerce.number(),
  text: z.string(),
  start: z.coerce.number(),
  end: z.coerce.number(),
  heading: z.string().nullable().optional().transform((value) => value ?? null),
  settings: z.string(),
  entities: z.string().nullable().optional().transform((value) => value ?? null),
  labels: z.string().nullable().optional().transform((value) => value ?? null),
  ingested_at: z.string(),
  /** The document's metadata (null when it has none, or the table was written before metadata). */
  metadata: StoredMetadata,
});

export type HitRow = SearchHit['row'];

export function toHitRow(raw: unknown): HitRow {
  return HitShape.parse(raw);
}

/**
 * The score every sink reports, LanceDB's convention so rankings compare across backends:
 * cosine similarity, the negated squared L2 distance, or the dot product. Higher is better.
 * Both vectors are taken as float32 (what every store keeps), the sums in float64: a vector read
 * back as the shortest decimal of its float32 (pgvector, Chroma) scores exactly as the original.
 */
export function scoreOf(distance: Distance, query: readonly number[], vector: ArrayLike<number>): number {
  let dot = 0;
  let qq = 0;
  let vv = 0;
  let l2 = 0;
  for (let i = 0; i < query.length; i++) {
    const q = Math.fround(query[i] ?? 0);
    const v = Math.fround(vector[i] ?? 0);
    dot += q * v;
    qq += q * q;
    vv += v * v;
    l2 += (q - v) * (q - v);
  }
  if (distance === 'dot') return dot;
  if (distance === 'l2') return -l2;
  return qq === 0 || vv === 0 ? 0 : dot / Math.sqrt(qq * vv);
}

/** Best first; equal scores by id, so a brute-force sink answers the same way every time. */
export function byScore(a: { score: number; row: { id: string } }, b: { score: number; row: { id: string } }): number {
  return b.score - a.score || (a.row.id < b.row.id ? -1 : a.row.id > b.row.id ? 1 : 0);
}

/**
 * Rows a search asks its store for before ranking them itself. Approximate indexes (Chroma's and
 * Qdrant's HNSW, pgvector's HNSW and LanceDB's IVF-PQ on large tables) may miss or misorder
 * neighbours near the k-th, and even an exact float32 scan may swap near-ties; k alone would let
 * each backend cut its list at a different place.
 */
export function candidateCount(k: number): number {
  return Math.max(4 * k, 100);
}

/**
 * The top k of a store's candidates, rescored exactly with `scoreOf` and ordered by `byScore`
 * (score, then id): the same rows give the same ids, order and scores on every backend.
 */
export function rankExactly<R extends { id: string }>(
  distance: Distance,
  query: readonly number[],
  candidates: readonly { row: R; vector: ArrayLike<number> }[],
  k: number,
): { row: R; score: number }[] {
  return candidates.map(({ row, vector }) => ({ row, score: scoreOf(distance, query, vector) })).sort(byScore).slice(0, k);
}

/**
 * Rows whose vectors are not of the table's output type are refused before anything is written
 * (the same way a table of another type is refused by prepare()).
 */
export function checkRowTypes(rows: readonly ChunkRow[], spec: TableSpec | null): void {
  if (spec === null) return;
  const type = vectorTypeOf(spec);
  for (const row of rows) checkVectorType(row.vector, type, `the vector of row ${row.id}`);
}

/**
 * `rankExactly` for a table of any output type: the vectors (the query and the stored ones, in
 * the type's values) of a binary table are compared by Hamming distance (`hammingScore`), the
 * others by the table's distance.
 */
export function rankTyped<R extends { id: string }>(
  spec: TableSpec,
  query: readonly number[],
  candidates: readonly { row: R; vector: ArrayLike<number> }[],
  k: number,
): { row: R; score: number }[] {
  const type = vectorTypeOf(spec);
  if (!isBinaryType(type)) return rankExactly(spec.distance, query, candidates, k);
  const bits = bitLength(spec.dimension);
  return candidates.map(({ row, vector }) => ({ row, score: hammingScore(hammingDistance(query, vector, type), bits) })).sort(byScore).slice(0, k);
}

/** The same check every backend applies to a query vector. */
export function checkQuery(vector: readonly number[], spec: TableSpec, k: number): void {
  if (vector.length !== spec.dimension) throw new ShoalError(ErrorCode.INVALID_INPUT, `the query vector has ${vector.length} dimensions, the index ${spec.dimension}`);
  checkVectorType(vector, vectorTypeOf(spec), 'the query vector');
  if (!Number.isInteger(k) || k < 1 || k > 10_000) throw new ShoalError(ErrorCode.INVALID_INPUT, `k must be an integer from 1 to 10000 (got ${k})`);
}

export { checkLanceDbTableName, checkTableName, RESERVED_TABLE_SUFFIXES, reservedSuffixOf } from './table-names.js';
