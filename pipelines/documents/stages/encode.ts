import type { CallOptions, Engine } from '../../../adapters/protocol/engine.js';
import { ErrorCode, ShoalError } from '../../../adapters/protocol/errors.js';
import type { EmbeddingDtype } from '../../../adapters/protocol/output-types.js';
import type { Role } from '../../../adapters/protocol/requests.js';

/**
 * Dense encoding of many texts (chunks of many documents) through the engine. The whole list goes
 * to the engine in large requests, so its token-budget scheduler forms the batches; nothing here
 * calls the model once per chunk.
 */

/** Items per encode request: well under the request limit, large enough to keep batches full. */
const ENCODE_REQUEST_ITEMS = 8_192;

export interface DenseEncodeOptions {
  model: string;
  role: Role;
  normalize?: boolean | undefined;
  priority?: 'bulk' | 'interactive';
  /**
   * Output type and Matryoshka dimensions, applied by the engine. The vectors then hold the type's
   * values (float16 half values, integer codes, packed sign bytes), all exact in a Float32Array.
   */
  dtype?: EmbeddingDtype | undefined;
  dimensions?: number | undefined;
}

export async function encodeDense(engine: Engine, texts: readonly string[], options: DenseEncodeOptions, call: CallOptions = {}): Promise<Float32Array[]> {
  const out: Float32Array[] = [];
  for (let at = 0; at < texts.length; at += ENCODE_REQUEST_ITEMS) {
    const slice = texts.slice(at, at + ENCODE_REQUEST_ITEMS);
    const result = await engine.encode(
      {
        model: options.model,
        items: slice.map((text) => ({ text })),
        output_types: ['dense'],
        role: options.role,
        ...(options.normalize === undefined ? {} : { normalize: options.normalize }),
        ...(options.dtype === undefined ? {} : { dtype: options.dtype }),
        ...(options.dimensions === undefined ? {} : { dimensions: options.dimensions }),
        priority: options.priority ?? 'bulk',
      },
      call,
    );
    const vectors = new Array<Float32Array | undefined>(slice.length);
    for (const item of result.items) if (item.dense !== undefined) vectors[item.index] = Float32Array.from(item.dense);
    vectors.forEach((vector, index) => {
      if (vector === undefined) throw new ShoalError(ErrorCode.INFERENCE_FAILED, `model ${options.model} returned no dense vector for item ${at + index}`);
      out.push(vector);
    });
  }
  return out;
}
