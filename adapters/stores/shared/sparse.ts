import { ErrorCode, ShoalError } from '../../protocol/errors.js';
import type { SparseValues } from '../store.js';
import { byScore } from './table-spec.js';

/**
 * Sparse (SPLADE-style) vectors in the sinks: one term-id space, one score, one ranking, so every
 * backend answers `searchSparse` with the same ids, order and scores for the same rows. Stores
 * that search sparse vectors themselves (pgvector's `<#>`, Qdrant's sparse query) are asked for
 * candidates and the candidates are rescored here, as `rankExactly` does for dense vectors.
 */

/**
 * The dimension every Shoal sparse vector declares: the term ids are a tokenizer's vocabulary ids
 * (30,522 for BERT, 250,002 for XLM-R), and the engine does not report the vocabulary size, so one
 * bound larger than any vocabulary is used for rows and queries alike. It is pgvector's largest
 * `sparsevec` dimension; a query and a row must declare the same dimension there.
 */
export const SPARSE_DIMENSION = 1_000_000_000;

/** Most non-zero terms a sparse vector may have (pgvector's `sparsevec` limit; SPLADE keeps a few hundred). */
export const MAX_SPARSE_TERMS = 16_000;

/** INVALID_INPUT unless the query is a well-formed sparse vector and k is in range. */
export function checkSparseQuery(query: SparseValues, k: number): void {
  const { indices, values } = query;
  if (indices.length !== values.length) throw new ShoalError(ErrorCode.INVALID_INPUT, `the sparse query has ${indices.length} indices and ${values.length} values`);
  if (indices.length > MAX_SPARSE_TERMS) throw new ShoalError(ErrorCode.INVALID_INPUT, `the sparse query has ${indices.length} terms, at most ${MAX_SPARSE_TERMS}`);
  for (const index of indices) {
    if (!Number.isInteger(index) || index < 0 || index >= query.dimension) {
      throw new ShoalError(ErrorCode.INVALID_INPUT, `sparse term id ${index} is outside 0..${query.dimension - 1}`);
    }
  }
  if (!Number.isInteger(k) || k < 1 || k > 10_000) throw new ShoalError(ErrorCode.INVALID_INPUT, `k must be an integer from 1 to 10000 (got ${k})`);
}

/**
 * Σ query·row over shared term ids. Both sides are taken as float32 (what every store keeps) and
 * summed in float64 in the row's term order, so a row read back from any backend scores the same.
 */
export function sparseDot(query: SparseValues, row: { indices: ArrayLike<number>; values: ArrayLike<number> }): number {
  return dotWith(queryWeights(query), row);
}

/** The query's weights by term id, as float32. */
function queryWeights(query: SparseValues): Map<number, number> {
  const weights = new Map<number, number>();
  for (let i = 0; i < query.indices.length; i++) weights.set(query.indices[i] ?? -1, Math.fround(query.values[i] ?? 0));
  return weights;
}

function dotWith(weights: ReadonlyMap<number, number>, row: { indices: ArrayLike<number>; values: ArrayLike<number> }): number {
  let dot = 0;
  for (let i = 0; i < row.indices.length; i++) {
    const weight = weights.get(row.indices[i] ?? -1);
    if (weight !== undefined) dot += weight * Math.fround(row.values[i] ?? 0);
  }
  return dot;
}

/**
 * The top k of the candidates by sparse dot product (ties by id); rows without a sparse vector
 * or sharing no term with the query (score 0) are left out.
 */
export function rankSparse<R extends { id: string }>(
  query: SparseValues,
  candidates: Iterable<{ row: R; sparse: { indices: ArrayLike<number>; values: ArrayLike<number> } | null | undefined }>,
  k: number,
): { row: R; score: number }[] {
  const weights = queryWeights(query);
  const scored: { row: R; score: number }[] = [];
  for (const { row, sparse } of candidates) {
    if (sparse == null) continue;
    const score = dotWith(weights, sparse);
    if (score !== 0) scored.push({ row, score });
  }
  return scored.sort(byScore).slice(0, k);
}

/** UNSUPPORTED_OPERATION for a backend that keeps no sparse vectors. */
export function noSparse(backend: string, where: string): ShoalError {
  return new ShoalError(
    ErrorCode.UNSUPPORTED_OPERATION,
    `${backend} (${where}) keeps no sparse vectors: ingest a pipeline with an encode.sparse model into LanceDB, pgvector, Qdrant, file:// or s3:// instead`,
  );
}
