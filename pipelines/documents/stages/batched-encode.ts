import type { CallOptions, Engine } from '../../../adapters/protocol/engine.js';
import { ErrorCode, ShoalError } from '../../../adapters/protocol/errors.js';
import { vectorValues } from '../../../adapters/protocol/output-types.js';
import type { EncodeRequest, OutputType, Role } from '../../../adapters/protocol/requests.js';
import type { EncodedItem, TypedEncodedItem, TypedEncodeResult } from '../../../adapters/protocol/results.js';

/**
 * The request loop every encode stage (dense, sparse, multi-vector) shares: the whole list of texts
 * goes to the engine in requests of `requestItems`, so its token-budget scheduler forms the batches
 * (nothing here calls the model once per chunk), and each answer item is mapped back to its text by
 * index. A text the answer gives no vector for fails the call: a shorter list would pair later
 * vectors with the wrong chunks. Where the engine hands out typed vectors (in process), dense
 * vectors stay Float32Array from the model thread to the store.
 */

/** An answer item as a stage reads it: dense as a Float32Array (typed engines) or numbers (the wire). */
export type StageItem = Omit<EncodedItem, 'dense'> & { dense?: Float32Array | number[] };

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
  vectorOf(item: StageItem): V | undefined;
  /** What is missing when vectorOf gives nothing, and a hint why (`sparse vector`, `is it a SPLADE model?`). */
  missing: { what: string; hint?: string };
}

export async function encodeInRequests<V>(engine: Engine, texts: readonly string[], encode: BatchedEncode<V>, call: CallOptions): Promise<V[]> {
  const out: V[] = [];
  for (let at = 0; at < texts.length; at += encode.requestItems) {
    const slice = texts.slice(at, at + encode.requestItems);
    const request: EncodeRequest = { ...encode.request, items: slice.map((text) => ({ text })) };
    const result = engine.encodeTyped === undefined ? await engine.encode(request, call) : stageResult(await engine.encodeTyped(request, call));
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

/** A typed answer's items with dense vectors as float values in a Float32Array (float16 bits decoded, codes as numbers). */
function stageResult(result: TypedEncodeResult): { items: StageItem[] } {
  return { items: result.items.map((item) => stageItem(item, result)) };
}

function stageItem(item: TypedEncodedItem, result: TypedEncodeResult): StageItem {
  const { dense, ...rest } = item;
  if (dense === undefined) return rest;
  if (dense instanceof Float32Array) return { ...rest, dense };
  return { ...rest, dense: Float32Array.from(vectorValues(dense, result.dtype)) };
}
