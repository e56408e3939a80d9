import { generator } from '../../test/fixtures/build/random.js';

/**
 * Vector sets for the search-at-scale bench (bench/search.ts): synthetic rows around real ones,
 * and the exact nearest neighbours an ANN index is scored against. Vectors are rows of one flat
 * Float32Array (`dim` values each), so a million of them is one 1.5 GB buffer outside the heap.
 */

/** A seeded PRNG: mulberry32, the one the test fixtures and the soak bench draw from, so the synthetic set is the same on every run. */
export const seededRandom = generator;

/** Standard normal draws (Box-Muller) from a uniform source. */
export function gaussian(random: () => number): () => number {
  let spare: number | null = null;
  return () => {
    if (spare !== null) {
      const out = spare;
      spare = null;
      return out;
    }
    const u = Math.max(random(), Number.MIN_VALUE);
    const v = random();
    const radius = Math.sqrt(-2 * Math.log(u));
    spare = radius * Math.sin(2 * Math.PI * v);
    return radius * Math.cos(2 * Math.PI * v);
  };
}

function dot(a: Float32Array, aAt: number, b: Float32Array, bAt: number, dim: number): number {
  let sum = 0;
  for (let i = 0; i < dim; i++) sum += (a[aAt + i] ?? 0) * (b[bAt + i] ?? 0);
  return sum;
}

/** 1/‖row‖ of every row (0 for a zero row), so cosine is one dot product per row. */
export function inverseNorms(vectors: Float32Array, count: number, dim: number): Float64Array {
  const out = new Float64Array(count);
  for (let row = 0; row < count; row++) {
    const norm = Math.sqrt(dot(vectors, row * dim, vectors, row * dim, dim));
    out[row] = norm === 0 ? 0 : 1 / norm;
  }
  return out;
}

/**
 * Mean cosine similarity of `sample` rows to their nearest other row among the first `count`:
 * how tight the real set's neighbourhoods are, which the synthetic noise is sized to.
 */
export function meanNearestCosine(vectors: Float32Array, count: number, dim: number, sample: number, random: () => number): number {
  const norms = inverseNorms(vectors, count, dim);
  let total = 0;
  const picks = Math.min(sample, count);
  for (let s = 0; s < picks; s++) {
    const row = Math.floor(random() * count);
    let best = -Infinity;
    for (let other = 0; other < count; other++) {
      if (other === row) continue;
      const cosine = dot(vectors, row * dim, vectors, other * dim, dim) * (norms[row] ?? 0) * (norms[other] ?? 0);
      if (cosine > best) best = cosine;
    }
    total += best;
  }
  return total / picks;
}

/**
 * `total` unit vectors: the first `real` rows of `source` as they are, then clustered gaussian
 * rows: a real row picked at random as centroid, plus isotropic noise whose expected norm
 * makes cos(row, centroid) ≈ `targetCosine` (noise norm r with 1/√(1+r²) = targetCosine), then
 * normalized. Each synthetic row also names its centroid (for its text).
 */
export function clusteredVectors(source: Float32Array, real: number, dim: number, total: number, targetCosine: number, seed: number): { vectors: Float32Array; centroids: Int32Array; sigma: number } {
  const vectors = new Float32Array(total * dim);
  vectors.set(source.subarray(0, Math.min(real, total) * dim));
  const centroids = new Int32Array(Math.max(0, total - real));
  const random = seededRandom(seed);
  const normal = gaussian(random);
  const ratio = Math.sqrt(1 / (targetCosine * targetCosine) - 1);
  const sigma = ratio / Math.sqrt(dim);
  const norms = inverseNorms(source, real, dim);
  for (let row = real; row < total; row++) {
    const centroid = Math.floor(random() * real);
    centroids[row - real] = centroid;
    const scale = norms[centroid] ?? 0;
    let norm = 0;
    for (let i = 0; i < dim; i++) {
      const value = (source[centroid * dim + i] ?? 0) * scale + sigma * normal();
      vectors[row * dim + i] = value;
      norm += value * value;
    }
    const inverse = 1 / Math.sqrt(norm);
    for (let i = 0; i < dim; i++) vectors[row * dim + i] = (vectors[row * dim + i] ?? 0) * inverse;
  }
  return { vectors, centroids, sigma };
}

/**
 * Like `clusteredVectors`, but the noise has the real rows' own shape instead of being isotropic:
 * each synthetic row is a real row (unit-normalized) plus a Gaussian combination of `terms`
 * random real rows' deviations from the real set's mean, i.e. noise whose covariance is the real
 * set's (sums of independent centred rows), scaled so that cos(row, centroid) ≈ `targetCosine`.
 * Why: real embeddings spread over few directions (the kit encoder's 10,000 SciFact chunks keep
 * 91 % of their variance in 50 of 384 principal components), while isotropic noise puts most of
 * its energy where real data has none, which no quantizer can compress: every ANN index scored on
 * it measures the noise, not the neighbourhoods. Both sets are reported (bench/search.ts --noise).
 */
export function shapedVectors(source: Float32Array, real: number, dim: number, total: number, targetCosine: number, seed: number, terms = 32): { vectors: Float32Array; centroids: Int32Array; scale: number } {
  const vectors = new Float32Array(total * dim);
  vectors.set(source.subarray(0, Math.min(real, total) * dim));
  const centroids = new Int32Array(Math.max(0, total - real));
  const random = seededRandom(seed);
  const normal = gaussian(random);
  const norms = inverseNorms(source, real, dim);
  const unit = new Float32Array(real * dim);
  for (let row = 0; row < real; row++) for (let i = 0; i < dim; i++) unit[row * dim + i] = (source[row * dim + i] ?? 0) * (norms[row] ?? 0);
  const mean = new Float64Array(dim);
  for (let row = 0; row < real; row++) for (let i = 0; i < dim; i++) mean[i] = (mean[i] ?? 0) + (unit[row * dim + i] ?? 0) / real;
  // tr(Σ): the expected squared norm of one centred row, so `terms` weighted rows have `terms`·scale²·tr(Σ).
  let trace = 0;
  for (let row = 0; row < real; row++) for (let i = 0; i < dim; i++) trace += ((unit[row * dim + i] ?? 0) - (mean[i] ?? 0)) ** 2 / real;
  const ratio = Math.sqrt(1 / (targetCosine * targetCosine) - 1);
  const scale = ratio / Math.sqrt(terms * trace);
  const noise = new Float64Array(dim);
  for (let row = real; row < total; row++) {
    const centroid = Math.floor(random() * real);
    centroids[row - real] = centroid;
    noise.fill(0);
    for (let term = 0; term < terms; term++) {
      const other = Math.floor(random() * real);
      const weight = normal() * scale;
      for (let i = 0; i < dim; i++) noise[i] = (noise[i] ?? 0) + weight * ((unit[other * dim + i] ?? 0) - (mean[i] ?? 0));
    }
    let norm = 0;
    for (let i = 0; i < dim; i++) {
      const value = (unit[centroid * dim + i] ?? 0) + (noise[i] ?? 0);
      vectors[row * dim + i] = value;
      norm += value * value;
    }
    const inverse = 1 / Math.sqrt(norm);
    for (let i = 0; i < dim; i++) vectors[row * dim + i] = (vectors[row * dim + i] ?? 0) * inverse;
  }
  return { vectors, centroids, scale };
}

/** The k rows (of the first `count`) with the highest cosine similarity to `query`, best first: brute force, the ground truth. */
export function exactTopK(vectors: Float32Array, norms: Float64Array, count: number, dim: number, query: Float32Array, k: number): number[] {
  const queryNorm = Math.sqrt(dot(query, 0, query, 0, dim));
  const best: { row: number; score: number }[] = [];
  for (let row = 0; row < count; row++) {
    const score = (dot(vectors, row * dim, query, 0, dim) * (norms[row] ?? 0)) / queryNorm;
    if (best.length === k && score <= (best[k - 1]?.score ?? -Infinity)) continue;
    let at = best.length;
    while (at > 0 && (best[at - 1]?.score ?? -Infinity) < score) at--;
    best.splice(at, 0, { row, score });
    if (best.length > k) best.pop();
  }
  return best.map((entry) => entry.row);
}
