import type { CallOptions, Engine } from '../../../adapters/protocol/engine.js';
import type { SparseValues } from '../../../adapters/stores/store.js';
import { SPARSE_DIMENSION } from '../../../adapters/stores/shared/sparse.js';
import { encodeInRequests, stageRequest, type EncodeStageOptions } from './batched-encode.js';

/**
 * Sparse (SPLADE) encoding of many texts through the engine, like encodeDense: the whole list of
 * a wave's chunks (many documents) goes in large requests (batched-encode.ts) and the engine's
 * token-budget scheduler forms the batches. Each vector is the engine's own `{indices, values}`, in
 * the one term-id space every sink shares (SPARSE_DIMENSION).
 */

/** The table metadata key naming the encode stage's sparse model (search encodes queries with it). */
export const SPARSE_MODEL_KEY = 'sparse_model';

/** Items per encode request, as for dense vectors. */
const ENCODE_REQUEST_ITEMS = 8_192;

export type SparseEncodeOptions = EncodeStageOptions;

export function encodeSparse(engine: Engine, texts: readonly string[], options: SparseEncodeOptions, call: CallOptions = {}): Promise<SparseValues[]> {
  return encodeInRequests<SparseValues>(engine, texts, {
    requestItems: ENCODE_REQUEST_ITEMS,
    request: stageRequest(options, 'sparse'),
    vectorOf: ({ sparse }) => (sparse === undefined ? undefined : { indices: sparse.indices, values: sparse.values, dimension: SPARSE_DIMENSION }),
    missing: { what: 'sparse vector', hint: 'is it a SPLADE model?' },
  }, call);
}
