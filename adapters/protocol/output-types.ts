import { z } from 'zod';

/**
 * Output types of dense vectors, with sentence-transformers' `quantize_embeddings` semantics, and
 * Matryoshka truncation. Pure functions on typed arrays: the engine applies them to its results,
 * the gateway packs them as base64, sinks convert with the same functions.
 *
 * - `float32` (default): the model's vector.
 * - `float16`: IEEE half precision, round to nearest even (numpy's `astype(float16)`); as JSON,
 *   the half value as a number; packed, 2 bytes little-endian per value.
 * - `uint8`: `trunc((v - min) / ((max - min) / 255))`, clamped to [0, 255]; `int8`: the same minus
 *   128, i.e. [-128, 127]. The calibration range is FIXED at [-1, 1] for every dimension
 *   (`DEFAULT_RANGE`), not sentence-transformers' per-call min/max of the batch: every component
 *   of an L2-normalized vector lies in it, and codes then mean the same in every call, every
 *   chunk of a file and every job part, so vectors written to one index stay comparable. Values
 *   outside the range are clamped. `quantizeEmbeddings(..., { ranges: 'batch' })` gives
 *   sentence-transformers' default (per-dimension min/max of the vectors given) for callers that
 *   quantize a whole collection at once.
 * - `ubinary`: one bit per dimension, 1 when the value is > 0, packed 8 per byte, first dimension
 *   in the most significant bit, the last byte zero-padded (numpy `packbits`); `binary`: the same
 *   bytes minus 128 as int8. A 384-dimension vector becomes 48 values.
 * - `dimensions` (Matryoshka): keep the first N dimensions, then L2-normalize again when the
 *   vectors are normalized (`truncateDimensions`); applied before the output type.
 */

export const EmbeddingDtype = z.enum(['float32', 'float16', 'int8', 'uint8', 'binary', 'ubinary']);
export type EmbeddingDtype = z.infer<typeof EmbeddingDtype>;

/** Largest `dimensions` a request may ask for (no embedding model comes near it). */
export const MAX_DIMENSIONS = 65_536;
export const Dimensions = z.number().int().min(1).max(MAX_DIMENSIONS);

/** A per-dimension calibration range for int8/uint8 (`min[i]`..`max[i]`), or one range for all. */
export interface QuantizeRange {
  min: number | ArrayLike<number>;
  max: number | ArrayLike<number>;
}

/** The fixed calibration range of int8/uint8 outputs: every component of a unit vector lies in it. */
export const DEFAULT_RANGE: QuantizeRange = Object.freeze({ min: -1, max: 1 });

/** A vector in an output type: the typed array its bytes are packed from (float16 as raw half bits). */
export type TypedVector = Float32Array | Uint16Array | Int8Array | Uint8Array;

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

/** IEEE 754 half bits of a number, round to nearest even (overflow → ±Infinity, NaN kept). */
export function toFloat16Bits(value: number): number {
  f32[0] = value;
  const x = u32[0] ?? 0;
  const sign = (x >>> 16) & 0x8000;
  const exponent = (x >>> 23) & 0xff;
  let mantissa = x & 0x7fffff;
  if (exponent === 0xff) return sign | 0x7c00 | (mantissa !== 0 ? 0x200 : 0);
  const e = exponent - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00;
  if (e <= 0) {
    // Subnormal half (or zero): shift the mantissa, with its implicit bit, into place.
    if (e < -10) return sign;
    mantissa |= 0x800000;
    const shift = 14 - e;
    const half = mantissa >>> shift;
    const rest = mantissa & ((1 << shift) - 1);
    const midpoint = 1 << (shift - 1);
    const roundUp = rest > midpoint || (rest === midpoint && (half & 1) === 1);
    return sign | (half + (roundUp ? 1 : 0));
  }
  const half = (e << 10) | (mantissa >>> 13);
  const rest = mantissa & 0x1fff;
  const roundUp = rest > 0x1000 || (rest === 0x1000 && (half & 1) === 1);
  // A carry out of the mantissa correctly bumps the exponent (up to Infinity).
  return sign | (half + (roundUp ? 1 : 0));
}

/** The number a half-precision bit pattern stands for. */
export function fromFloat16Bits(bits: number): number {
  const sign = bits & 0x8000 ? -1 : 1;
  const exponent = (bits >>> 10) & 0x1f;
  const mantissa = bits & 0x3ff;
  if (exponent === 0) return sign * mantissa * 2 ** -24;
  if (exponent === 0x1f) return mantissa === 0 ? sign * Number.POSITIVE_INFINITY : Number.NaN;
  return sign * (1 + mantissa / 1024) * 2 ** (exponent - 15);
}

function rangeAt(bound: number | ArrayLike<number>, index: number): number {
  return typeof bound === 'number' ? bound : (bound[index] ?? 0);
}

/** The first `dimensions` values, L2-normalized again when `renormalize` (the input is not changed). */
export function truncateDimensions(vector: Float32Array, dimensions: number, renormalize: boolean): Float32Array {
  const out = vector.slice(0, Math.min(dimensions, vector.length));
  if (renormalize) {
    let sum = 0;
    for (let i = 0; i < out.length; i++) sum += (out[i] ?? 0) * (out[i] ?? 0);
    const norm = Math.max(Math.sqrt(sum), 1e-12);
    for (let i = 0; i < out.length; i++) out[i] = (out[i] ?? 0) / norm;
  }
  return out;
}

function packSignBits(vector: ArrayLike<number>): Uint8Array {
  const out = new Uint8Array(Math.ceil(vector.length / 8));
  for (let i = 0; i < vector.length; i++) {
    if ((vector[i] ?? 0) > 0) out[i >> 3] = (out[i >> 3] ?? 0) | (0x80 >> (i & 7));
  }
  return out;
}

/** One vector in an output type (see the module comment for each type's rule). */
export function quantizeVector(vector: ArrayLike<number>, dtype: EmbeddingDtype, range: QuantizeRange = DEFAULT_RANGE): TypedVector {
  switch (dtype) {
    case 'float32':
      return vector instanceof Float32Array ? vector : Float32Array.from(vector);
    case 'float16': {
      const out = new Uint16Array(vector.length);
      for (let i = 0; i < vector.length; i++) out[i] = toFloat16Bits(vector[i] ?? 0);
      return out;
    }
    case 'uint8':
    case 'int8': {
      const out = dtype === 'int8' ? new Int8Array(vector.length) : new Uint8Array(vector.length);
      const shift = dtype === 'int8' ? 128 : 0;
      for (let i = 0; i < vector.length; i++) {
        const start = rangeAt(range.min, i);
        const step = (rangeAt(range.max, i) - start) / 255;
        const code = step > 0 ? Math.trunc(((vector[i] ?? 0) - start) / step) : 0;
        out[i] = Math.min(255, Math.max(0, Number.isFinite(code) ? code : 0)) - shift;
      }
      return out;
    }
    case 'ubinary':
      return packSignBits(vector);
    case 'binary':
      // The Uint8Array's bytes minus 128, read as int8: the same bits as sentence-transformers' `packbits(...) - 128`.
      return new Int8Array(packSignBits(vector).map((byte) => byte - 128).buffer);
  }
}

/** Per-dimension min/max of a set of vectors: sentence-transformers' default calibration. */
export function batchRange(vectors: readonly ArrayLike<number>[]): QuantizeRange {
  const dim = vectors[0]?.length ?? 0;
  const min = new Float64Array(dim).fill(Number.POSITIVE_INFINITY);
  const max = new Float64Array(dim).fill(Number.NEGATIVE_INFINITY);
  for (const vector of vectors) {
    for (let i = 0; i < dim; i++) {
      const v = vector[i] ?? 0;
      if (v < (min[i] ?? 0)) min[i] = v;
      if (v > (max[i] ?? 0)) max[i] = v;
    }
  }
  return { min, max };
}

export interface QuantizeOptions {
  /** Calibration of int8/uint8: a range, or `'batch'` for the vectors' own per-dimension min/max. @default DEFAULT_RANGE */
  ranges?: QuantizeRange | 'batch';
}

/** Many vectors in an output type (`quantize_embeddings`); the range applies to all of them. */
export function quantizeEmbeddings(vectors: readonly ArrayLike<number>[], dtype: EmbeddingDtype, options: QuantizeOptions = {}): TypedVector[] {
  const range = options.ranges === 'batch' ? batchRange(vectors) : (options.ranges ?? DEFAULT_RANGE);
  return vectors.map((vector) => quantizeVector(vector, dtype, range));
}

/** The JSON values of a typed vector: numbers, float16 as the half value it holds. */
export function vectorValues(vector: TypedVector, dtype: EmbeddingDtype): number[] {
  if (dtype === 'float16') return Array.from(vector, fromFloat16Bits);
  return Array.from(vector);
}

/** The vector's bytes, little-endian (float32, float16), one byte per value for the 8-bit types. */
export function vectorBytes(vector: TypedVector): Uint8Array {
  const bytes = new Uint8Array(vector.buffer, vector.byteOffset, vector.byteLength);
  const littleEndian = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;
  if (littleEndian || vector.BYTES_PER_ELEMENT === 1) return bytes;
  const swapped = new Uint8Array(bytes.length);
  const width = vector.BYTES_PER_ELEMENT;
  for (let i = 0; i < bytes.length; i += width) for (let b = 0; b < width; b++) swapped[i + b] = bytes[i + width - 1 - b] ?? 0;
  return swapped;
}

/** JSON values (as `vectorValues` returns them) → the typed vector of the output type. */
export function typedFromValues(values: readonly number[], dtype: EmbeddingDtype): TypedVector {
  switch (dtype) {
    case 'float32':
      return Float32Array.from(values);
    case 'float16':
      return Uint16Array.from(values, toFloat16Bits);
    case 'int8':
    case 'binary':
      return Int8Array.from(values);
    case 'uint8':
    case 'ubinary':
      return Uint8Array.from(values);
  }
}

/** Base64 of the packed values (OpenAI's `encoding_format: "base64"` for float32). */
export function valuesToBase64(values: readonly number[], dtype: EmbeddingDtype): string {
  return Buffer.from(vectorBytes(typedFromValues(values, dtype))).toString('base64');
}

/** The values packed by `valuesToBase64`, decoded again (float16 as the half value). */
export function valuesFromBase64(base64: string, dtype: EmbeddingDtype): number[] {
  const bytes = Buffer.from(base64, 'base64');
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const out: number[] = [];
  switch (dtype) {
    case 'float32':
      for (let i = 0; i + 4 <= bytes.length; i += 4) out.push(view.getFloat32(i, true));
      return out;
    case 'float16':
      for (let i = 0; i + 2 <= bytes.length; i += 2) out.push(fromFloat16Bits(view.getUint16(i, true)));
      return out;
    case 'int8':
    case 'binary':
      for (let i = 0; i < bytes.length; i++) out.push(view.getInt8(i));
      return out;
    case 'uint8':
    case 'ubinary':
      return Array.from(bytes);
  }
}
