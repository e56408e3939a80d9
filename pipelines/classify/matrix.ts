/**
 * Dense similarity search on packed float32 matrices: one row per category, L2-normalized, so
 * a dot product is the cosine. The loop is a plain indexed loop over one Float32Array with four
 * accumulators (V8 keeps it in registers); no per-category objects or JS number arrays are made.
 * Ties keep the lower row (stable order for identical outputs across runs).
 */

export interface PackedMatrix {
  readonly rows: number;
  readonly dim: number;
  /** rows × dim, row-major. */
  readonly data: Float32Array;
}

export interface TopK {
  /** queries × k rows (−1 where fewer than k rows exist). */
  readonly indices: Int32Array<ArrayBuffer>;
  readonly scores: Float32Array<ArrayBuffer>;
  readonly k: number;
}

/** Scales `data[offset .. offset+dim)` to unit length in place (a zero vector stays zero). */
export function normalizeRow(data: Float32Array, offset: number, dim: number): void {
  let sum = 0;
  for (let i = 0; i < dim; i++) {
    const value = data[offset + i] as number;
    sum += value * value;
  }
  if (sum === 0) return;
  const scale = 1 / Math.sqrt(sum);
  for (let i = 0; i < dim; i++) data[offset + i] = (data[offset + i] as number) * scale;
}

/** Packs vectors into one matrix, normalizing each row. */
export function packRows(vectors: readonly ArrayLike<number>[], dim: number, target?: Float32Array): PackedMatrix {
  const data = target ?? new Float32Array(vectors.length * dim);
  vectors.forEach((vector, row) => {
    if (vector.length !== dim) throw new RangeError(`vector ${row} has ${vector.length} dimensions, expected ${dim}`);
    data.set(vector, row * dim);
    normalizeRow(data, row * dim, dim);
  });
  return { rows: vectors.length, dim, data };
}

/** Dot product of matrix row `row` with `query[qOffset .. qOffset+dim)`. */
export function rowDot(matrix: PackedMatrix, row: number, query: Float32Array, qOffset: number): number {
  const { data, dim } = matrix;
  const base = row * dim;
  let s0 = 0;
  let s1 = 0;
  let s2 = 0;
  let s3 = 0;
  let i = 0;
  for (; i + 3 < dim; i += 4) {
    s0 += (data[base + i] as number) * (query[qOffset + i] as number);
    s1 += (data[base + i + 1] as number) * (query[qOffset + i + 1] as number);
    s2 += (data[base + i + 2] as number) * (query[qOffset + i + 2] as number);
    s3 += (data[base + i + 3] as number) * (query[qOffset + i + 3] as number);
  }
  for (; i < dim; i++) s0 += (data[base + i] as number) * (query[qOffset + i] as number);
  return s0 + s1 + s2 + s3;
}

/**
 * The best `k` rows for each of `count` queries (packed like the matrix, count × dim), best first.
 * A running top-k kept sorted by insertion: k is small (tens), so this beats a heap.
 */
export function topK(matrix: PackedMatrix, queries: Float32Array, count: number, k: number): TopK {
  const keep = Math.max(1, Math.min(k, matrix.rows));
  const indices = new Int32Array(count * k).fill(-1);
  const scores = new Float32Array(count * k).fill(Number.NEGATIVE_INFINITY);
  const bestIdx = new Int32Array(keep);
  const bestScore = new Float64Array(keep);
  for (let q = 0; q < count; q++) {
    const qOffset = q * matrix.dim;
    let filled = 0;
    for (let row = 0; row < matrix.rows; row++) {
      const score = rowDot(matrix, row, queries, qOffset);
      if (filled === keep && score <= (bestScore[keep - 1] as number)) continue;
      let at = filled < keep ? filled++ : keep - 1;
      while (at > 0 && (bestScore[at - 1] as number) < score) {
        bestScore[at] = bestScore[at - 1] as number;
        bestIdx[at] = bestIdx[at - 1] as number;
        at--;
      }
      bestScore[at] = score;
      bestIdx[at] = row;
    }
    for (let i = 0; i < filled; i++) {
      indices[q * k + i] = bestIdx[i] as number;
      scores[q * k + i] = bestScore[i] as number;
    }
  }
  return { indices, scores, k };
}
