import type { CallOptions, Engine } from '../../../adapters/protocol/engine.js';
import { encodeInRequests, stageRequest, type EncodeStageOptions } from './batched-encode.js';

/**
 * Multi-vector (ColBERT) encoding of many texts through the engine, like encodeDense: whole lists
 * of chunks of many documents per request (batched-encode.ts), batched by the engine's token-budget
 * scheduler. Each text gives its token vectors (role `document`: document markers; role `query`:
 * query markers and expansion, as the model's configuration says).
 */

/** The table metadata key naming the encode stage's multi-vector model (search rescores with it). */
export const MULTIVECTOR_MODEL_KEY = 'multivector_model';

/** Items per encode request: fewer than for single vectors, since each answer holds one vector per token. */
const ENCODE_REQUEST_ITEMS = 1_024;

export type MultivectorEncodeOptions = EncodeStageOptions;

export function encodeMultivector(engine: Engine, texts: readonly string[], options: MultivectorEncodeOptions, call: CallOptions = {}): Promise<number[][][]> {
  return encodeInRequests(engine, texts, {
    requestItems: ENCODE_REQUEST_ITEMS,
    request: stageRequest(options, 'multivector'),
    // No token vectors at all is as much a missing answer as no field.
    vectorOf: ({ multivector }) => (multivector === undefined || multivector.length === 0 ? undefined : multivector),
    missing: { what: 'token vectors', hint: 'is it a ColBERT model?' },
  }, call);
}
