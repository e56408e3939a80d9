import { describe, expect, it } from 'vitest';
import {
  EmbeddingDtype,
  fromFloat16Bits,
  quantizeEmbeddings,
  quantizeVector,
  toFloat16Bits,
  truncateDimensions,
  valuesFromBase64,
  valuesToBase64,
  vectorValues,
} from '../../../../adapters/protocol/output-types.js';
import { referenceHalf, referencePackbits, referenceUint8, seeded, unitVectors } from '../../../helpers/reference-quantize.js';

/**
 * Output types against a second, deliberately naive implementation written here from
 * sentence-transformers' `quantize_embeddings` and numpy's definitions (no shared code).
 */

describe('float16', () => {
  it('matches numpy astype(float16) on documented values, ties to even, subnormals and overflow', () => {
    expect(fromFloat16Bits(toFloat16Bits(0.1))).toBe(0.0999755859375);
    expect(fromFloat16Bits(toFloat16Bits(1 / 3))).toBe(0.333251953125);
    expect(fromFloat16Bits(toFloat16Bits(2049))).toBe(2048); // tie → even
    expect(fromFloat16Bits(toFloat16Bits(2051))).toBe(2052); // tie → even
    expect(fromFloat16Bits(toFloat16Bits(65504))).toBe(65504);
    expect(fromFloat16Bits(toFloat16Bits(65520))).toBe(Infinity);
    expect(fromFloat16Bits(toFloat16Bits(6e-8))).toBe(5.960464477539063e-8); // smallest subnormal
    expect(fromFloat16Bits(toFloat16Bits(1e-8))).toBe(0);
    expect(toFloat16Bits(1)).toBe(0x3c00);
    expect(toFloat16Bits(-2)).toBe(0xc000);
  });

  it('rounds every component of real vectors to the nearest half', () => {
    const random = seeded(3);
    const values = Array.from({ length: 400 }, (_, i) => (random() * 2 - 1) * Math.pow(10, (i % 9) - 6));
    const got = vectorValues(quantizeVector(values, 'float16'), 'float16');
    expect(got).toEqual(values.map(referenceHalf));
  });
});

describe('int8 / uint8', () => {
  const vectors = unitVectors(6, 48);

  it('uint8 uses the fixed [-1, 1] range by default', () => {
    const expected = referenceUint8(vectors, new Array<number>(48).fill(-1), new Array<number>(48).fill(1));
    expect(quantizeEmbeddings(vectors, 'uint8').map((v) => Array.from(v))).toEqual(expected);
    expect(quantizeVector([-1, 1, 0, 0.5], 'uint8')).toEqual(new Uint8Array([0, 255, 127, 191]));
  });

  it('int8 is uint8 - 128', () => {
    const expected = referenceUint8(vectors, new Array<number>(48).fill(-1), new Array<number>(48).fill(1)).map((v) => v.map((x) => x - 128));
    expect(quantizeEmbeddings(vectors, 'int8').map((v) => Array.from(v))).toEqual(expected);
    expect(Array.from(quantizeVector([-1, 1, 0], 'int8'))).toEqual([-128, 127, -1]);
  });

  it("ranges: 'batch' is sentence-transformers' default: per-dimension min/max of the vectors", () => {
    const min = vectors[0]?.map((_, i) => Math.min(...vectors.map((v) => v[i] ?? 0))) ?? [];
    const max = vectors[0]?.map((_, i) => Math.max(...vectors.map((v) => v[i] ?? 0))) ?? [];
    const expected = referenceUint8(vectors, min, max);
    expect(quantizeEmbeddings(vectors, 'uint8', { ranges: 'batch' }).map((v) => Array.from(v))).toEqual(expected);
    // Each dimension's minimum maps to 0 and its maximum to 255.
    expect(expected.some((v) => v.includes(255))).toBe(true);
  });

  it('clamps values outside the range', () => {
    expect(Array.from(quantizeVector([-3, 3], 'uint8'))).toEqual([0, 255]);
  });
});

describe('binary / ubinary', () => {
  it('packs sign bits 8 per byte, first dimension first, the last byte zero-padded', () => {
    const v = [0.5, -0.1, 0.2, 0.3, -0.4, 0, 0.1, -0.2, 0.9, -0.9, 0.1];
    expect(Array.from(quantizeVector(v, 'ubinary'))).toEqual([0b10110010, 0b10100000]);
    expect(Array.from(quantizeVector(v, 'binary'))).toEqual([0b10110010 - 128, 0b10100000 - 128]);
  });

  it('agrees with the packbits reference on 384-dimension vectors', () => {
    for (const v of unitVectors(4, 384, 11)) {
      expect(Array.from(quantizeVector(v, 'ubinary'))).toEqual(referencePackbits(v));
      expect(Array.from(quantizeVector(v, 'binary'))).toEqual(referencePackbits(v).map((b) => b - 128));
      expect(quantizeVector(v, 'binary')).toHaveLength(48);
    }
  });
});

describe('Matryoshka dimensions', () => {
  it('keeps the first N values and renormalizes them', () => {
    const [v = []] = unitVectors(1, 64, 5);
    const cut = v.slice(0, 16);
    const norm = Math.sqrt(cut.reduce((a, x) => a + x * x, 0));
    const got = truncateDimensions(Float32Array.from(v), 16, true);
    expect(got).toHaveLength(16);
    got.forEach((x, i) => expect(x).toBeCloseTo((cut[i] ?? 0) / norm, 6));
    expect(Array.from(truncateDimensions(Float32Array.from(v), 16, false))).toEqual(Array.from(Float32Array.from(cut)));
  });
});

describe('base64', () => {
  it('packs float32 and float16 little-endian', () => {
    expect(valuesToBase64([1], 'float32')).toBe(Buffer.from([0, 0, 0x80, 0x3f]).toString('base64'));
    expect(valuesToBase64([1, -2], 'float16')).toBe(Buffer.from([0x00, 0x3c, 0x00, 0xc0]).toString('base64'));
    expect(valuesToBase64([-128, 127], 'int8')).toBe(Buffer.from([0x80, 0x7f]).toString('base64'));
  });

  it('round-trips every output type', () => {
    const [v = []] = unitVectors(1, 40, 9);
    for (const dtype of EmbeddingDtype.options) {
      const values = vectorValues(quantizeVector(v, dtype), dtype);
      const decoded = valuesFromBase64(valuesToBase64(values, dtype), dtype);
      expect(decoded, dtype).toEqual(values);
    }
  });
});
