import type * as lancedb from '@lancedb/lancedb';
import { Field, FixedSizeList, Float32, Int32, List, type RecordBatch } from 'apache-arrow';
import { z } from 'zod';
import { ErrorCode, ShoalError } from '../../protocol/errors.js';
import { sqlStringList } from '../shared/filter.js';
import { checkMultivectorQuery, multivectorDimension } from '../shared/multivector.js';
import type { MultivectorSearchOptions, SearchHit, SearchOptions, SparseValues, TableSpec } from '../store.js';
import { checkSparseQuery, rankSparse } from '../shared/sparse.js';
import { byScore, toHitRow } from '../shared/table-spec.js';

/**
 * The LanceDB sink's sparse and multi-vector columns, beside its dense vector (lancedb/store.ts):
 * - sparse: LanceDB has no sparse type, so a SPLADE vector is two list columns, `sparse_indices`
 *   (int32) and `sparse_values` (float32), null for a row without one, searched by an exact scan;
 * - multi-vector: LanceDB's own type, a list of fixed-size float32 vectors (`multivector`),
 *   searched by LanceDB's MaxSim (cosine).
 */

/** The metadata columns of a hit (the vectors stay in the store). */
const HIT_COLUMNS = ['id', 'document_id', 'source', 'page', 'chunk', 'text', 'start', 'end', 'heading', 'settings', 'ingested_at'];

/** The columns a table with this spec adds for its sparse and multi-vectors. */
export function extraVectorFields(spec: TableSpec): Field[] {
  return [
    ...(spec.optionalColumns.includes('sparse')
      ? [new Field('sparse_indices', new List(new Field('item', new Int32(), true)), true), new Field('sparse_values', new List(new Field('item', new Float32(), true)), true)]
      : []),
    ...(spec.optionalColumns.includes('multivector')
      ? [new Field('multivector', new List(new Field('item', new FixedSizeList(multivectorDimension(spec, 'the LanceDB table'), new Field('item', new Float32(), true)), true)), true)]
      : []),
  ];
}

const SparseId = z.string();

/**
 * The rows of one scanned batch as rankSparse candidates, read column-wise from the Arrow buffers:
 * a row's term ids and weights are zero-copy subarrays of the list columns' value buffers, between
 * the row's two list offsets (building a JS object per row with `batch.toArray()` was about
 * fifteen times slower on 100k rows).
 */
function* sparseCandidates(batch: RecordBatch): Generator<{ row: { id: string }; sparse: { indices: ArrayLike<number>; values: ArrayLike<number> } | null }> {
  const ids = batch.getChild('id');
  const indices = listParts(batch, 'sparse_indices');
  const values = listParts(batch, 'sparse_values');
  if (ids === null) throw new ShoalError(ErrorCode.INTERNAL, 'the sparse scan returned no id column');
  for (let row = 0; row < batch.numRows; row++) {
    const id = SparseId.parse(ids.get(row));
    if (!indices.valid(row) || !values.valid(row)) {
      yield { row: { id }, sparse: null };
      continue;
    }
    yield { row: { id }, sparse: { indices: indices.at(row), values: values.at(row) } };
  }
}

/** One list column of a batch as (offsets, values) buffers: `at(row)` is the row's list, a view. */
function listParts(batch: RecordBatch, name: string): { valid(row: number): boolean; at(row: number): ArrayLike<number> } {
  const data = batch.getChild(name)?.data;
  const chunk = data?.[0];
  const child = chunk?.children[0];
  if (data === undefined || data.length !== 1 || chunk === undefined || child === undefined || child.offset !== 0) {
    throw new ShoalError(ErrorCode.INTERNAL, `the sparse scan returned an unexpected ${name} column`);
  }
  const offsets = z.instanceof(Int32Array).parse(chunk.valueOffsets);
  const values = ListValues.parse(child.values);
  return { valid: (row) => chunk.getValid(row), at: (row) => values.subarray(offsets[row] ?? 0, offsets[row + 1] ?? 0) };
}

/** The value buffer of a list column's child: int32 term ids or float32 weights. */
const ListValues = z.union([z.instanceof(Int32Array), z.instanceof(Float32Array)]);
const Distance = z.object({ _distance: z.number() });

/** The columns a hit reads: the metadata ones, the optional entities and labels, and `extra` (never the vectors). */
export function hitColumns(spec: TableSpec, extra: readonly string[] = []): string[] {
  return [...HIT_COLUMNS, ...spec.optionalColumns.filter((column) => column === 'entities' || column === 'labels'), ...extra];
}


function failed(what: string, error: unknown): ShoalError {
  return new ShoalError(ErrorCode.INVALID_INPUT, `${what} failed: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
}

/**
 * An exact scan: the filter is pushed down to LanceDB, which streams `id` and the two sparse
 * columns of the matching rows batch by batch (memory bounded by a batch and k, not the table);
 * each batch is ranked here (rankSparse, the ranking every backend shares) and the top k rows are
 * then read by id. Every matching row's term list is read per query: linear in the table (about
 * 0.7 s for 100k rows of 120 terms on a 2-core machine, docs/storage.md); pgvector or Qdrant answer
 * from the store at larger sizes.
 */
export async function searchSparseColumns(chunks: lancedb.Table, spec: TableSpec, query: SparseValues, options: SearchOptions, where: string, extraColumns: readonly string[] = []): Promise<SearchHit[]> {
  checkSparseQuery(query, options.k);
  if (!spec.optionalColumns.includes('sparse')) throw new ShoalError(ErrorCode.INVALID_INPUT, `${where} holds no sparse vectors (its pipeline had no encode.sparse model)`);
  const condition = options.filter === undefined ? 'sparse_indices IS NOT NULL' : `(${options.filter}) AND sparse_indices IS NOT NULL`;
  let best: { row: { id: string }; score: number }[] = [];
  let rows: unknown[];
  try {
    for await (const batch of chunks.query().where(condition).select(['id', 'sparse_indices', 'sparse_values'])) {
      best = [...best, ...rankSparse(query, sparseCandidates(batch), options.k)].sort(byScore).slice(0, options.k);
    }
    if (best.length === 0) return [];
    rows = await chunks.query().where(`id IN ${sqlStringList(best.map((hit) => hit.row.id))}`).select(hitColumns(spec, extraColumns)).toArray();
  } catch (error) {
    throw failed('sparse search', error);
  }
  const byId = new Map(rows.map((raw) => {
    const row = toHitRow(raw);
    return [row.id, row];
  }));
  return best.flatMap(({ row, score }) => {
    const found = byId.get(row.id);
    return found === undefined ? [] : [{ row: found, score }];
  });
}

/**
 * LanceDB's multi-vector search: MaxSim of the query's token vectors against each row's (cosine;
 * `_distance` is 1 − MaxSim), an exact scan prefiltered to the filter and the id list. Scores are
 * MaxSim, higher is better; equal scores ordered by id.
 */
export async function searchMultivectorColumn(
  chunks: lancedb.Table,
  spec: TableSpec,
  query: readonly (readonly number[])[],
  options: MultivectorSearchOptions,
  where: string,
  /** Columns the table has beyond the fixed ones (its metadata column). */
  extraColumns: readonly string[] = [],
): Promise<SearchHit[]> {
  checkMultivectorQuery(query, options.k);
  if (!spec.optionalColumns.includes('multivector')) throw new ShoalError(ErrorCode.INVALID_INPUT, `${where} holds no multi-vectors (its pipeline had no encode.multivector model)`);
  if (options.ids !== undefined && options.ids.length === 0) return [];
  const conditions = ['multivector IS NOT NULL', ...(options.filter === undefined ? [] : [`(${options.filter})`]), ...(options.ids === undefined ? [] : [`id IN ${sqlStringList(options.ids)}`])];
  let rows: unknown[];
  try {
    rows = await chunks
      .vectorSearch(query.map((vector) => [...vector]))
      .column('multivector')
      .distanceType('cosine')
      .where(conditions.join(' AND '))
      .select([...hitColumns(spec, extraColumns), '_distance'])
      .limit(options.ids === undefined ? options.k : Math.max(options.k, options.ids.length))
      .toArray();
  } catch (error) {
    throw failed('multi-vector search', error);
  }
  return rows.map((raw) => ({ row: toHitRow(raw), score: 1 - Distance.parse(raw)._distance })).sort(byScore).slice(0, options.k);
}
