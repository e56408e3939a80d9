import { ErrorCode, ShoalError } from '../../../adapters/protocol/errors.js';
import type { EncodeResult } from '../../../adapters/protocol/results.js';

/** Dense vectors out of an encode result, shared by the OpenAI and TEI routes. */

/** The dense vector of every item, in request order. */
export function denseVectors(result: EncodeResult, model: string): number[][] {
  const vectors: number[][] = new Array<number[]>(result.items.length);
  for (const item of result.items) {
    if (item.dense === undefined) {
      throw new ShoalError(ErrorCode.UNSUPPORTED_OPERATION, `model ${model} returned no dense vector; use a dense embedding model here`);
    }
    vectors[item.index] = item.dense;
  }
  return vectors;
}

/**
 * The first `dimensions` values, L2-normalized again (Matryoshka truncation) unless `normalize` is
 * false: TEI's /embed with `normalize: false` cuts the raw pooled vector and leaves it raw.
 * Refuses to make a vector longer than the model's.
 */
export function shortenVector(vector: readonly number[], dimensions: number, normalize = true): number[] {
  if (dimensions > vector.length) {
    throw new ShoalError(ErrorCode.INVALID_INPUT, `dimensions ${dimensions} is more than the model's ${vector.length}`, {
      details: { issues: [{ path: ['dimensions'], message: `at most ${vector.length}` }], modelDimensions: vector.length },
    });
  }
  const cut = vector.slice(0, dimensions);
  if (!normalize) return cut;
  let sum = 0;
  for (const value of cut) sum += value * value;
  const norm = Math.sqrt(sum);
  return norm === 0 ? cut : cut.map((value) => value / norm);
}
