import type { CallOptions, Engine } from '../../../adapters/protocol/engine.js';
import { ErrorCode, ShoalError } from '../../../adapters/protocol/errors.js';
import type { Role } from '../../../adapters/protocol/requests.js';

/**
 * Multi-vector (ColBERT) encoding of many texts through the engine, like encodeDense: whole lists
 * of chunks of many documents per request, batched by the engine's token-budget scheduler. Each
 * text gives its token vectors (role `document`: document markers; role `query`: query markers
 * and expansion, as the model's configuration says).
 */

/** The table metadata key naming the encode stage's multi-vector model (search rescores with it). */
export const MULTIVECTOR_MODEL_KEY = 'multivector_model';

/** Items per encode request: fewer than for single vectors, since each answer holds one vector per token. */
const ENCODE_REQUEST_ITEMS = 1_024;

export interface MultivectorEncodeOptions {
  model: string;
  role: Role;
  priority?: 'bulk' | 'interactive';
}

export async function encodeMultivector(engine: Engine, texts: readonly string[], options: MultivectorEncodeOptions, call: CallOptions = {}): Promise<number[][][]> {
  const out: number[][][] = [];
  for (let at = 0; at < texts.length; at += ENCODE_REQUEST_ITEMS) {
    const slice = texts.slice(at, at + ENCODE_REQUEST_ITEMS);
    const result = await engine.encode(
      { model: options.model, items: slice.map((text) => ({ text })), output_types: ['multivector'], role: options.role, priority: options.priority ?? 'bulk' },
      call,
    );
    const vectors = new Array<number[][] | undefined>(slice.length);
    for (const item of result.items) if (item.multivector !== undefined) vectors[item.index] = item.multivector;
    vectors.forEach((vector, index) => {
      if (vector === undefined || vector.length === 0) {
        throw new ShoalError(ErrorCode.INFERENCE_FAILED, `model ${options.model} returned no token vectors for item ${at + index} (is it a ColBERT model?)`);
      }
      out.push(vector);
    });
  }
  return out;
}
