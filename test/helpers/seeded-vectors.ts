import { generator } from '../fixtures/build/random.js';

/**
 * Deterministic pseudo-random unit vectors (mulberry32, the fixtures' generator), so a test or
 * bench over synthetic rows gives the same vectors on every run and a failure reproduces. Used
 * by the cross-backend ranking test and the sinks bench.
 */

/** One unit vector of `dimension` components uniform in [-1, 1] before normalisation, drawn from `next`; float32 after it. */
export function unitVector(next: () => number, dimension: number): Float32Array {
  const v = Array.from({ length: dimension }, () => next() * 2 - 1);
  const norm = Math.hypot(...v);
  return Float32Array.from(v, (x) => x / norm);
}

/** `count` unit vectors from a generator seeded with `seed`. */
export function unitVectors(count: number, dimension: number, seed: number): Float32Array[] {
  const next = generator(seed);
  return Array.from({ length: count }, () => unitVector(next, dimension));
}
