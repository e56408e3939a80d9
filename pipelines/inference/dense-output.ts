import { ErrorCode, ShoalError } from '../../adapters/protocol/errors.js';
import { quantizeVector, truncateDimensions, vectorValues, type EmbeddingDtype, type TypedVector } from '../../adapters/protocol/output-types.js';
import type { EncodedItem, EncodeResult, TypedEncodeResult } from '../../adapters/protocol/results.js';

/**
 * Dense vectors as the request asks for them: Matryoshka `dimensions`, then the output type
 * (adapters/protocol/output-types.ts). Runs on the engine's thread on vectors that arrived as
 * transferred Float32Arrays; nothing here copies a vector more than once.
 */

export interface DenseShape {
  dtype: EmbeddingDtype;
  dimensions?: number | undefined;
}

/** How far from 1 a norm may be for the vector to count as normalized (float32 rounding of 1,024 values stays far below). */
const UNIT_TOLERANCE = 1e-3;

function isUnit(vector: Float32Array): boolean {
  let sum = 0;
  for (let i = 0; i < vector.length; i++) sum += (vector[i] ?? 0) * (vector[i] ?? 0);
  return Math.abs(Math.sqrt(sum) - 1) < UNIT_TOLERANCE;
}

/**
 * One vector in the requested shape. `dimensions` keeps the first N values and normalizes them
 * again when the full vector was unit length (the model or the request normalizes), so a
 * normalized model stays normalized and `normalize: false` gets the plain cut.
 */
export function shapeDense(vector: Float32Array, shape: DenseShape): TypedVector {
  let cut = vector;
  if (shape.dimensions !== undefined && shape.dimensions !== vector.length) {
    if (shape.dimensions > vector.length) {
      throw new ShoalError(ErrorCode.INVALID_INPUT, `dimensions ${shape.dimensions} is more than the model's ${vector.length}`, {
        details: { issues: [{ path: ['dimensions'], message: `at most ${vector.length}` }], modelDimensions: vector.length },
      });
    }
    cut = truncateDimensions(vector, shape.dimensions, isUnit(vector));
  }
  return quantizeVector(cut, shape.dtype);
}

/** Bytes of one value of each output type; the bit types pack 8 values per byte. */
const VALUE_BYTES: Record<EmbeddingDtype, number> = { float32: 4, float16: 2, int8: 1, uint8: 1, binary: 1 / 8, ubinary: 1 / 8 };

/**
 * The fewest bytes `items` dense vectors of a model with `dimension` values take in the requested
 * shape, in any encoding (packed binary is the smallest; JSON takes more).
 */
export function denseBytesAtLeast(items: number, dimension: number, shape: DenseShape): number {
  const kept = Math.min(shape.dimensions ?? dimension, dimension);
  return items * Math.ceil(kept * VALUE_BYTES[shape.dtype]);
}

/** The wire form: dense vectors as number arrays (float16 as the half values). */
export function toWireResult(result: TypedEncodeResult): EncodeResult {
  const { dtype, items, ...rest } = result;
  return {
    ...rest,
    items: items.map(({ dense, ...item }): EncodedItem => (dense === undefined ? item : { ...item, dense: vectorValues(dense, dtype) })),
  };
}
