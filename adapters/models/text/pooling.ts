import type { FloatTensor } from '../../runtime/tensors.js';

/**
 * Pooling of token embeddings [batch, seq, dim] into one vector per row, with the
 * sentence-transformers semantics (masked mean with a 1e-9 floor, [CLS], last real token, masked
 * max, mean × sqrt(len)), and L2 normalization with PyTorch's 1e-12 epsilon.
 */

export type PoolingMode = 'mean' | 'cls' | 'last' | 'max' | 'mean_sqrt_len';

export interface PoolingMask {
  seqLen: number;
  /** Row-major [batch, seq], 1 = pool this position. */
  mask: Uint8Array;
}

export function poolRow(hidden: FloatTensor, row: number, mode: PoolingMode, pooled: PoolingMask): Float32Array {
  const dim = hidden.dims[2] ?? 0;
  const seq = hidden.dims[1] ?? 0;
  const data = hidden.data;
  const out = new Float32Array(dim);
  const maskBase = row * pooled.seqLen;
  const rowBase = row * seq * dim;
  const real = (t: number): boolean => pooled.mask[maskBase + t] === 1;
  switch (mode) {
    case 'cls':
    case 'last': {
      let pick = -1;
      if (mode === 'cls') {
        for (let t = 0; t < seq && pick < 0; t++) if (real(t)) pick = t;
      } else {
        for (let t = seq - 1; t >= 0 && pick < 0; t--) if (real(t)) pick = t;
      }
      if (pick < 0) pick = 0;
      out.set(data.subarray(rowBase + pick * dim, rowBase + (pick + 1) * dim));
      return out;
    }
    case 'max': {
      out.fill(Number.NEGATIVE_INFINITY);
      let any = false;
      for (let t = 0; t < seq; t++) {
        if (!real(t)) continue;
        any = true;
        const base = rowBase + t * dim;
        for (let d = 0; d < dim; d++) {
          const v = data[base + d] ?? 0;
          if (v > (out[d] ?? 0)) out[d] = v;
        }
      }
      if (!any) out.fill(0);
      return out;
    }
    case 'mean':
    case 'mean_sqrt_len': {
      let count = 0;
      for (let t = 0; t < seq; t++) {
        if (!real(t)) continue;
        count++;
        const base = rowBase + t * dim;
        for (let d = 0; d < dim; d++) out[d] = (out[d] ?? 0) + (data[base + d] ?? 0);
      }
      const divisor = mode === 'mean' ? Math.max(count, 1e-9) : Math.sqrt(Math.max(count, 1e-9));
      for (let d = 0; d < dim; d++) out[d] = (out[d] ?? 0) / divisor;
      return out;
    }
  }
}

export function l2Normalize(vector: Float32Array): Float32Array {
  let sum = 0;
  for (const v of vector) sum += v * v;
  const norm = Math.max(Math.sqrt(sum), 1e-12);
  for (let i = 0; i < vector.length; i++) vector[i] = (vector[i] ?? 0) / norm;
  return vector;
}

export function dot(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let sum = 0;
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) sum += (a[i] ?? 0) * (b[i] ?? 0);
  return sum;
}
