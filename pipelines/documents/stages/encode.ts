import type { CallOptions, Engine } from '../../../adapters/protocol/engine.js';
import type { EmbeddingDtype } from '../../../adapters/protocol/output-types.js';
import { encodeInRequests, stageRequest, type EncodeStageOptions } from './batched-encode.js';

/**
 * Dense encoding of many texts (chunks of many documents) through the engine, in large requests
 * (batched-encode.ts) so that the engine's token-budget scheduler forms the batches.
 */

/** Items per encode request: well under the request limit, large enough to keep batches full. */
const ENCODE_REQUEST_ITEMS = 8_192;

export interface DenseEncodeOptions extends EncodeStageOptions {
  normalize?: boolean | undefined;
  /**
   * Output type and Matryoshka dimensions, applied by the engine. The vectors then hold the type's
   * values (float16 half values, integer codes, packed sign bytes), all exact in a Float32Array.
   */
  dtype?: EmbeddingDtype | undefined;
  dimensions?: number | undefined;
}

export function encodeDense(engine: Engine, texts: readonly string[], options: DenseEncodeOptions, call: CallOptions = {}): Promise<Float32Array[]> {
  return encodeInRequests(engine, texts, {
    requestItems: ENCODE_REQUEST_ITEMS,
    request: {
      ...stageRequest(options, 'dense'),
      ...(options.normalize === undefined ? {} : { normalize: options.normalize }),
      ...(options.dtype === undefined ? {} : { dtype: options.dtype }),
      ...(options.dimensions === undefined ? {} : { dimensions: options.dimensions }),
    },
    vectorOf: (item) => (item.dense === undefined || item.dense instanceof Float32Array ? item.dense : Float32Array.from(item.dense)),
    missing: { what: 'dense vector' },
  }, call);
}
