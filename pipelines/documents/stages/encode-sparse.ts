import type { CallOptions, Engine } from '../../../adapters/protocol/engine.js';
import { ErrorCode, ShoalError } from '../../../adapters/protocol/errors.js';
import type { Role } from '../../../adapters/protocol/requests.js';
import type { SparseValues } from '../../../adapters/sinks/sink.js';
import { SPARSE_DIMENSION } from '../../../adapters/sinks/sparse.js';

/**
 * Sparse (SPLADE) encoding of many texts through the engine, like encodeDense: the whole list of
 * a wave's chunks (many documents) goes in large requests and the engine's token-budget scheduler
 * forms the batches. Each vector is the engine's own `{indices, values}`, in the one term-id space
 * every sink shares (SPARSE_DIMENSION).
 */

/** The table metadata key naming the encode stage's sparse model (search encodes queries with it). */
export const SPARSE_MODEL_KEY = 'sparse_model';

/** Items per encode request, as for dense vectors. */
const ENCODE_REQUEST_ITEMS = 8_192;

export interface SparseEncodeOptions {
  model: string;
  role: Role;
  priority?: 'bulk' | 'interactive';
}

export async function encodeSparse(engine: Engine, texts: readonly string[], options: SparseEncodeOptions, call: CallOptions = {}): Promise<SparseValues[]> {
  const out: SparseValues[] = [];
  for (let at = 0; at < texts.length; at += ENCODE_REQUEST_ITEMS) {
    const slice = texts.slice(at, at + ENCODE_REQUEST_ITEMS);
    const result = await engine.encode(
      { model: options.model, items: slice.map((text) => ({ text })), output_types: ['sparse'], role: options.role, priority: options.priority ?? 'bulk' },
      call,
    );
    const vectors = new Array<SparseValues | undefined>(slice.length);
    for (const item of result.items) {
      if (item.sparse !== undefined) vectors[item.index] = { indices: item.sparse.indices, values: item.sparse.values, dimension: SPARSE_DIMENSION };
    }
    vectors.forEach((vector, index) => {
      if (vector === undefined) throw new ShoalError(ErrorCode.INFERENCE_FAILED, `model ${options.model} returned no sparse vector for item ${at + index} (is it a SPLADE model?)`);
      out.push(vector);
    });
  }
  return out;
}
