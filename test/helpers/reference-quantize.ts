/**
 * A second, deliberately naive implementation of the output types, written from
 * sentence-transformers' `quantize_embeddings` and numpy's definitions, sharing no code with
 * adapters/protocol/output-types.ts: tests compare the two.
 */

/** Every finite half value, decoded by the textbook formula, for a brute-force nearest search. */
const HALVES: { bits: number; value: number }[] = [];
for (let bits = 0; bits < 0x10000; bits++) {
  const e = (bits >> 10) & 31;
  const m = bits & 1023;
  if (e === 31) continue;
  const magnitude = e === 0 ? (m / 1024) * Math.pow(2, -14) : (1 + m / 1024) * Math.pow(2, e - 15);
  HALVES.push({ bits, value: bits & 0x8000 ? -magnitude : magnitude });
}

/** numpy `astype(float16)`: nearest half, ties to the even mantissa, beyond 65520 → Infinity. */
export function referenceHalf(x: number): number {
  const f = Math.fround(x);
  if (Math.abs(f) >= 65520) return f > 0 ? Infinity : -Infinity;
  let best = HALVES[0];
  for (const candidate of HALVES) {
    if (best === undefined) break;
    const d = Math.abs(candidate.value - f);
    const bd = Math.abs(best.value - f);
    if (d < bd || (d === bd && (candidate.bits & 1) === 0 && (best.bits & 1) === 1)) best = candidate;
  }
  const value = best?.value ?? Number.NaN;
  return value === 0 && f < 0 ? -0 : value;
}

/** sentence-transformers: starts = ranges[0], steps = (ranges[1] - ranges[0]) / 255, codes truncated. */
export function referenceUint8(vectors: number[][], min: number[], max: number[]): number[][] {
  return vectors.map((v) =>
    v.map((x, i) => {
      const start = min[i] ?? 0;
      const steps = ((max[i] ?? 0) - start) / 255;
      return Math.max(0, Math.min(255, Math.trunc((x - start) / steps)));
    }),
  );
}

/** numpy packbits(v > 0): bits as a string, 8 per byte, the first dimension in the high bit. */
export function referencePackbits(v: number[]): number[] {
  const bits = v.map((x) => (x > 0 ? '1' : '0')).join('');
  const out: number[] = [];
  for (let i = 0; i < bits.length; i += 8) out.push(parseInt(bits.slice(i, i + 8).padEnd(8, '0'), 2));
  return out;
}

export function seeded(seed: number): () => number {
  let s = seed;
  return () => {
    s = (s * 1103515245 + 12345) % 2147483648;
    return s / 2147483648;
  };
}

export function unitVectors(count: number, dim: number, seed = 7): number[][] {
  const random = seeded(seed);
  return Array.from({ length: count }, () => {
    const v = Array.from({ length: dim }, () => random() * 2 - 1);
    const norm = Math.sqrt(v.reduce((a, x) => a + x * x, 0));
    return v.map((x) => Math.fround(x / norm));
  });
}

/** The reference of one vector in an output type, as the JSON values the engine returns. */
export function referenceValues(v: number[], dtype: string): number[] {
  switch (dtype) {
    case 'float16':
      return v.map(referenceHalf);
    case 'uint8':
      return referenceUint8([v], v.map(() => -1), v.map(() => 1))[0] ?? [];
    case 'int8':
      return (referenceUint8([v], v.map(() => -1), v.map(() => 1))[0] ?? []).map((x) => x - 128);
    case 'ubinary':
      return referencePackbits(v);
    case 'binary':
      return referencePackbits(v).map((x) => x - 128);
    default:
      return v.map((x) => Math.fround(x));
  }
}
