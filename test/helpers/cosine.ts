/**
 * Cosine similarity of two equal-length vectors (plain arrays or typed arrays), summed in float64;
 * two zero vectors count as identical (1), one zero vector against another as unrelated (0).
 * Shared by the int8 fidelity test and bench/weight-formats.ts.
 */
export function cosine(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let dot = 0;
  let na = 0;
  let nb = 0;
  for (let i = 0; i < a.length; i++) {
    const x = a[i] ?? 0;
    const y = b[i] ?? 0;
    dot += x * y;
    na += x * x;
    nb += y * y;
  }
  if (na === 0 && nb === 0) return 1;
  return na === 0 || nb === 0 ? 0 : dot / Math.sqrt(na * nb);
}
