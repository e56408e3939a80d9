import { z } from 'zod';
import { ErrorCode, ShoalError } from '../protocol/errors.js';
import type { ChunkRow, Distance, DocumentState, OptionalColumn, SearchHit, TableSpec } from './sink.js';

/**
 * What the backends other than LanceDB share: the stored spec's shape, the mismatch check with
 * its message, the score convention, and the zod shapes rows and states are read back through.
 */

export const StoredSpec = z.object({
  dimension: z.number().int().positive().max(65_536),
  distance: z.enum(['cosine', 'l2', 'dot']),
  optionalColumns: z.array(z.enum(['entities', 'labels'])).max(2),
  metadata: z.record(z.string(), z.string()),
});

export function freezeSpec(spec: TableSpec): TableSpec {
  return Object.freeze({ ...spec, optionalColumns: Object.freeze([...spec.optionalColumns]), metadata: Object.freeze({ ...spec.metadata }) });
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
  return StoredSpec.parse({ ...spec, optionalColumns: [...spec.optionalColumns] });
}

/** CONFIG_INVALID naming what differs (dimension, distance, missing columns), or nothing when the spec fits. */
export function checkSpec(existing: TableSpec, spec: TableSpec, where: string): void {
  const mismatches: string[] = [];
  if (existing.dimension !== spec.dimension) mismatches.push(`dimension ${existing.dimension} (the encoder gives ${spec.dimension})`);
  if (existing.distance !== spec.distance) mismatches.push(`distance ${existing.distance} (the pipeline asks ${spec.distance})`);
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
});

export type HitRow = SearchHit['row'];

export function toHitRow(raw: unknown): HitRow {
  return HitShape.parse(raw);
}

/**
 * The score every sink reports, LanceDB's convention so rankings compare across backends:
 * cosine similarity, the negated squared L2 distance, or the dot product. Higher is better.
 */
export function scoreOf(distance: Distance, query: readonly number[], vector: ArrayLike<number>): number {
  let dot = 0;
  let qq = 0;
  let vv = 0;
  let l2 = 0;
  for (let i = 0; i < query.length; i++) {
    const q = query[i] ?? 0;
    const v = vector[i] ?? 0;
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

/** The same check every backend applies to a query vector. */
export function checkQuery(vector: readonly number[], spec: TableSpec, k: number): void {
  if (vector.length !== spec.dimension) throw new ShoalError(ErrorCode.INVALID_INPUT, `the query vector has ${vector.length} dimensions, the index ${spec.dimension}`);
  if (!Number.isInteger(k) || k < 1 || k > 10_000) throw new ShoalError(ErrorCode.INVALID_INPUT, `k must be an integer from 1 to 10000 (got ${k})`);
}

/** Table and collection names every backend accepts (the LanceDB rule, a safe SQL identifier once quoted). */
export function checkTableName(name: string): string {
  if (!/^[A-Za-z0-9_-]{1,48}$/.test(name)) throw new ShoalError(ErrorCode.INVALID_INPUT, `table name ${JSON.stringify(name)}: use 1 to 48 letters, digits, '_' or '-'`);
  return name;
}
