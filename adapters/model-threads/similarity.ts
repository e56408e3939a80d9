import { ErrorCode, ShoalError } from '../protocol/errors.js';
import type { ItemOutput } from '../models/family.js';
import type { CompareTo } from './thread-messages.js';

/**
 * Similarity between an encoded item and a reference (the query), computed in the model thread
 * so large multi-vector encodings never travel: cosine for dense vectors, dot product for sparse
 * ones, and ColBERT MaxSim for multi-vectors.
 */

function cosine(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let dotSum = 0;
  let na = 0;
  let nb = 0;
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a[i] ?? 0;
    const y = b[i] ?? 0;
    dotSum += x * y;
    na += x * x;
    nb += y * y;
  }
  return dotSum / Math.max(Math.sqrt(na) * Math.sqrt(nb), 1e-12);
}

/** Sparse dot product; both index lists are ascending. */
export function sparseDot(a: { indices: number[]; values: number[] }, b: { indices: number[]; values: number[] }): number {
  let i = 0;
  let j = 0;
  let sum = 0;
  while (i < a.indices.length && j < b.indices.length) {
    const x = a.indices[i] ?? 0;
    const y = b.indices[j] ?? 0;
    if (x === y) {
      sum += (a.values[i] ?? 0) * (b.values[j] ?? 0);
      i++;
      j++;
    } else if (x < y) i++;
    else j++;
  }
  return sum;
}

/** Sum over query vectors of the best dot product with any document vector. */
export function maxSim(query: readonly number[][], document: readonly number[][]): number {
  let total = 0;
  for (const q of query) {
    let best = Number.NEGATIVE_INFINITY;
    for (const d of document) {
      let s = 0;
      for (let k = 0; k < q.length; k++) s += (q[k] ?? 0) * (d[k] ?? 0);
      if (s > best) best = s;
    }
    if (best !== Number.NEGATIVE_INFINITY) total += best;
  }
  return total;
}

export function similarity(item: ItemOutput, reference: CompareTo): number {
  if (reference.multivector !== undefined && item.multivector !== undefined) return maxSim(reference.multivector, item.multivector);
  if (reference.dense !== undefined && item.dense !== undefined) return cosine(reference.dense, item.dense);
  if (reference.sparse !== undefined && item.sparse !== undefined) return sparseDot(reference.sparse, item.sparse);
  throw new ShoalError(ErrorCode.INTERNAL, 'scoring needs the query and the items encoded the same way');
}
