import { describe, expect, it } from 'vitest';
import { clusteredVectors, exactTopK, inverseNorms, seededRandom, shapedVectors } from '../../../bench/lib/vector-sets.js';

/** The synthetic rows of the search-at-scale bench (bench/search.ts): how close to their centroid, and in which directions. */

const DIM = 24;
const REAL = 300;
/** Real rows that live in the first 4 coordinates only (plus a common offset in coordinate 0): a low-rank set, as real embeddings are. */
function lowRankSet(): Float32Array {
  const random = seededRandom(5);
  const out = new Float32Array(REAL * DIM);
  for (let row = 0; row < REAL; row++) {
    out[row * DIM] = 3;
    for (let i = 0; i < 4; i++) out[row * DIM + i] = (out[row * DIM + i] ?? 0) + (random() - 0.5);
  }
  return out;
}

function meanCosineToCentroid(vectors: Float32Array, source: Float32Array, centroids: Int32Array): number {
  const norms = inverseNorms(source, REAL, DIM);
  let total = 0;
  centroids.forEach((centroid, at) => {
    let dot = 0;
    for (let i = 0; i < DIM; i++) dot += (vectors[(REAL + at) * DIM + i] ?? 0) * (source[centroid * DIM + i] ?? 0);
    total += dot * (norms[centroid] ?? 0);
  });
  return total / centroids.length;
}

describe('synthetic vector sets', () => {
  const source = lowRankSet();
  const total = REAL + 4_000;

  it('keep the real rows first, and put synthetic unit rows at the asked cosine from their centroid', () => {
    for (const make of [clusteredVectors, shapedVectors]) {
      const { vectors, centroids } = make(source, REAL, DIM, total, 0.98, 41);
      expect(Array.from(vectors.subarray(0, REAL * DIM))).toEqual(Array.from(source));
      const norms = inverseNorms(vectors, total, DIM);
      for (let row = REAL; row < total; row += 97) expect(1 / (norms[row] ?? 0)).toBeCloseTo(1, 5);
      expect(meanCosineToCentroid(vectors, source, centroids)).toBeCloseTo(0.98, 2);
    }
  });

  it('shaped noise stays in the directions the real rows use; isotropic noise fills all of them', () => {
    const outside = (vectors: Float32Array): number => {
      let energy = 0;
      for (let row = REAL; row < total; row++) for (let i = 4; i < DIM; i++) energy += (vectors[row * DIM + i] ?? 0) ** 2;
      return energy / (total - REAL);
    };
    expect(outside(shapedVectors(source, REAL, DIM, total, 0.98, 41).vectors)).toBeLessThan(1e-12);
    expect(outside(clusteredVectors(source, REAL, DIM, total, 0.98, 41).vectors)).toBeGreaterThan(0.02);
  });

  it('is the same set for the same seed, and exactTopK ranks by cosine', () => {
    const a = shapedVectors(source, REAL, DIM, total, 0.98, 7);
    const b = shapedVectors(source, REAL, DIM, total, 0.98, 7);
    expect(a.vectors).toEqual(b.vectors);
    const query = a.vectors.slice(REAL * DIM, (REAL + 1) * DIM);
    const top = exactTopK(a.vectors, inverseNorms(a.vectors, total, DIM), total, DIM, query, 3);
    expect(top[0]).toBe(REAL);
    expect(new Set(top).size).toBe(3);
  });
});
