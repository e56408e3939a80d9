import { ErrorCode, ShoalError } from '../../protocol/errors.js';
import type { TableSpec } from '../store.js';

/**
 * Multi-vectors (ColBERT token vectors) in the sinks. Only stores with a native multi-vector type
 * keep them (LanceDB's list-of-vectors column searched with MaxSim, Qdrant's multivector config
 * with `comparator: max_sim`); the others refuse a table that would hold them, at prepare time,
 * instead of dropping the vectors silently.
 */

/** The spec metadata key holding the length of one token vector (the column type needs it). */
export const MULTIVECTOR_DIMENSION_KEY = 'multivector_dimension';

/** The token-vector length a spec with the `multivector` column records. */
export function multivectorDimension(spec: TableSpec, where: string): number {
  const dimension = Number(spec.metadata[MULTIVECTOR_DIMENSION_KEY]);
  if (!Number.isInteger(dimension) || dimension < 1 || dimension > 65_536) {
    throw new ShoalError(ErrorCode.CONFIG_INVALID, `${where}: a table with multi-vectors needs metadata ${MULTIVECTOR_DIMENSION_KEY} (a positive integer)`);
  }
  return dimension;
}

/** UNSUPPORTED_OPERATION for a backend without multi-vectors. */
export function noMultivector(backend: string, where: string): ShoalError {
  return new ShoalError(
    ErrorCode.UNSUPPORTED_OPERATION,
    `${backend} (${where}) keeps no multi-vectors: ingest a pipeline with an encode.multivector model into LanceDB or Qdrant instead`,
  );
}

/** The check at the top of prepare() on backends without multi-vectors. */
export function refuseMultivector(spec: TableSpec, backend: string, where: string): void {
  if (spec.optionalColumns.includes('multivector')) throw noMultivector(backend, where);
}

/** INVALID_INPUT unless every query vector has the same positive length. */
export function checkMultivectorQuery(query: readonly (readonly number[])[], k: number): void {
  const length = query[0]?.length ?? 0;
  if (length === 0 || query.some((vector) => vector.length !== length)) {
    throw new ShoalError(ErrorCode.INVALID_INPUT, 'a multi-vector query needs one or more token vectors of one length');
  }
  if (!Number.isInteger(k) || k < 1 || k > 10_000) throw new ShoalError(ErrorCode.INVALID_INPUT, `k must be an integer from 1 to 10000 (got ${k})`);
}
