import type { CallOptions, Engine } from '../../../adapters/protocol/engine.js';
import { ErrorCode, ShoalError } from '../../../adapters/protocol/errors.js';
import type { EncodeRequest, OutputType, Role } from '../../../adapters/protocol/requests.js';
import type { EncodedItem } from '../../../adapters/protocol/results.js';

/**
 * The request loop every encode stage (dense, sparse, multi-vector) shares: the whole list of texts
 * goes to the engine in requests of `requestItems`, so its token-budget scheduler forms the batches
 * (nothing here calls the model once per chunk), and each answer item is mapped back to its text by
 * index. A text the answer gives no vector for fails the call: a shorter list would pair later
 * vectors with the wrong chunks.
 */

/** What every encode stage is called with (the dense one adds its output options). */
export interface EncodeStageOptions {
  model: string;
  role: Role;
  priority?: 'bulk' | 'interactive';
}

/** A stage's request for one output type; texts are bulk work unless the caller says otherwise. */
export function stageRequest(options: EncodeStageOptions, outputType: OutputType): BatchedEncode<unknown>['request'] {
  return { model: options.model, output_types: [outputType], role: options.role, priority: options.priority ?? 'bulk' };
}

/** One stage's use of the loop: its request, and how an answer item becomes its vector. */
export interface BatchedEncode<V> {
  /** Items per engine request. */
  requestItems: number;
  /** Everything of the request but its items (model, output type, role, priority, dense options). */
  request: Omit<EncodeRequest, 'items'> & { model: string };
  /** The item's vector in the stage's form, or undefined when the answer holds none. */
  vectorOf(item: EncodedItem): V | undefined;
  /** What is missing when vectorOf gives nothing, and a hint why (`sparse vector`, `is it a SPLADE model?`). */
  missing: { what: string; hint?: string };
}

export async function encodeInRequests<V>(engine: Engine, texts: readonly string[], encode: BatchedEncode<V>, call: CallOptions): Promise<V[]> {
  const out: V[] = [];
  for (let at = 0; at < texts.length; at += encode.requestItems) {
    const slice = texts.slice(at, at + encode.requestItems);
    const result = await engine.encode({ ...encode.request, items: slice.map((text) => ({ text })) }, call);
    const vectors = new Array<V | undefined>(slice.length).fill(undefined);
    for (const item of result.items) {
      const vector = item.index < slice.length ? encode.vectorOf(item) : undefined;
      if (vector !== undefined) vectors[item.index] = vector;
    }
    vectors.forEach((vector, index) => {
      if (vector === undefined) {
        const hint = encode.missing.hint === undefined ? '' : ` (${encode.missing.hint})`;
        throw new ShoalError(ErrorCode.INFERENCE_FAILED, `model ${encode.request.model} returned no ${encode.missing.what} for item ${at + index}${hint}`);
      }
      out.push(vector);
    });
  }
  return out;
}
