import { ErrorCode, ShoalError } from '../../protocol/errors.js';
import { fromFloat16Bits, toFloat16Bits, type EmbeddingDtype } from '../../protocol/output-types.js';

/**
 * What a sink needs to know about the output type of the vectors a table holds
 * (adapters/protocol/output-types.ts): whether a value belongs to the type, and, for the binary
 * types, the bit forms backends store (pgvector's `bit(n)`, LanceDB's packed bytes searched by
 * Hamming distance, the unpacked 0/1 sign bits of the backends that have no bit type).
 *
 * Rows and queries carry the type's JSON values, as the engine returns them: float16 as the half
 * value (exact in float32), int8/uint8 as their codes, binary/ubinary as the packed bytes (8
 * dimensions per value; `binary` is `ubinary − 128`). A table's `dimension` counts these values,
 * so a 384-dimension model gives `dimension` 48 in a binary table (384 bits).
 */

export function isBinaryType(type: EmbeddingDtype): boolean {
  return type === 'binary' || type === 'ubinary';
}

/** Bits of a binary table whose vectors hold `dimension` packed bytes. */
export function bitLength(dimension: number): number {
  return dimension * 8;
}

/** A value of the type: finite for float32, a half value for float16, an integer code in range for the others. */
function fits(value: number, type: EmbeddingDtype): boolean {
  switch (type) {
    case 'float32':
      return Number.isFinite(value);
    case 'float16':
      return Number.isFinite(value) && fromFloat16Bits(toFloat16Bits(value)) === value;
    case 'int8':
    case 'binary':
      return Number.isInteger(value) && value >= -128 && value <= 127;
    case 'uint8':
    case 'ubinary':
      return Number.isInteger(value) && value >= 0 && value <= 255;
  }
}

/**
 * INVALID_INPUT when a vector's values are not of the table's type (a float vector written to an
 * int8 table, a query not converted the way the index was built), naming the first bad value.
 */
export function checkVectorType(values: ArrayLike<number>, type: EmbeddingDtype, what: string): void {
  for (let i = 0; i < values.length; i++) {
    const value = values[i] ?? Number.NaN;
    if (!fits(value, type)) {
      throw new ShoalError(ErrorCode.INVALID_INPUT, `${what} is not a ${type} vector (value ${value} at ${i}); the index stores ${type} vectors`);
    }
  }
}

/** The packed bytes of binary values as unsigned bytes (`binary` codes are the bytes − 128). */
export function unsignedBytes(values: ArrayLike<number>, type: EmbeddingDtype): Uint8Array {
  const shift = type === 'binary' ? 128 : 0;
  return Uint8Array.from({ length: values.length }, (_, i) => (values[i] ?? 0) + shift);
}

/** Unsigned bytes back to the type's values. */
export function fromUnsignedBytes(bytes: ArrayLike<number>, type: EmbeddingDtype): number[] {
  const shift = type === 'binary' ? 128 : 0;
  return Array.from({ length: bytes.length }, (_, i) => (bytes[i] ?? 0) - shift);
}

/** One 0/1 value per dimension, first dimension first (the high bit of the first byte). */
export function unpackBits(values: ArrayLike<number>, type: EmbeddingDtype): number[] {
  const bytes = unsignedBytes(values, type);
  const out = new Array<number>(bytes.length * 8);
  for (let i = 0; i < out.length; i++) out[i] = ((bytes[i >> 3] ?? 0) >> (7 - (i & 7))) & 1;
  return out;
}

/** 0/1 values (as unpackBits gives them, or as a store returns them) packed into the type's values. */
export function packBits(bits: ArrayLike<number>, type: EmbeddingDtype): number[] {
  const bytes = new Uint8Array(Math.ceil(bits.length / 8));
  for (let i = 0; i < bits.length; i++) if ((bits[i] ?? 0) > 0.5) bytes[i >> 3] = (bytes[i >> 3] ?? 0) | (0x80 >> (i & 7));
  return fromUnsignedBytes(bytes, type);
}

/** Bits that differ between two binary vectors of the same type. */
export function hammingDistance(a: ArrayLike<number>, b: ArrayLike<number>, type: EmbeddingDtype): number {
  const x = unsignedBytes(a, type);
  const y = unsignedBytes(b, type);
  let distance = 0;
  for (let i = 0; i < x.length; i++) {
    let differ = (x[i] ?? 0) ^ (y[i] ?? 0);
    while (differ !== 0) {
      differ &= differ - 1;
      distance += 1;
    }
  }
  return distance;
}

/**
 * The score of a hit in a binary table, whatever its distance: `1 − 2·hamming/bits`, the cosine
 * similarity of the two ±1 sign vectors (1 = the same bits, −1 = every bit differs), so it reads
 * like a cosine score and orders hits exactly as the Hamming distance does.
 */
export function hammingScore(hamming: number, bits: number): number {
  return bits === 0 ? 0 : 1 - (2 * hamming) / bits;
}

/**
 * A vector as a backend without a bit type stores it (Qdrant, Chroma): the binary types as their
 * unpacked 0/1 bits, under L2 distance, whose square is then the Hamming distance; every other
 * type as its values.
 */
export function toFlatVector(values: ArrayLike<number>, type: EmbeddingDtype): number[] {
  return isBinaryType(type) ? unpackBits(values, type) : Array.from(values);
}

/** A vector stored by `toFlatVector`, back as the type's values. */
export function fromFlatVector(stored: ArrayLike<number>, type: EmbeddingDtype): number[] {
  return isBinaryType(type) ? packBits(stored, type) : Array.from(stored);
}
