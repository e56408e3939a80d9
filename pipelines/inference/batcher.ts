/**
 * Length-aware batch packing (pure): items are sorted by token count and cut into batches whose
 * padded cost (longest item × items) stays within a token budget, so similar lengths travel
 * together and padding stays small. An item larger than the budget still gets a batch of its own:
 * a big request is split, never refused.
 */

export interface PackOptions {
  /** Padded tokens per batch (longest sequence × batch size). */
  maxBatchTokens: number;
  maxBatchItems: number;
}

export interface PackedBatch {
  /** Indices into the input, longest first. */
  indices: number[];
  /** Padded cost: longest × count. */
  paddedTokens: number;
  realTokens: number;
}

export function packBatches(costs: readonly number[], options: PackOptions): PackedBatch[] {
  const order = costs.map((_, i) => i).sort((a, b) => (costs[b] ?? 0) - (costs[a] ?? 0) || a - b);
  const batches: PackedBatch[] = [];
  let current: PackedBatch | null = null;
  let longest = 0;
  for (const index of order) {
    const cost = Math.max(1, costs[index] ?? 1);
    if (current !== null) {
      const count = current.indices.length + 1;
      if (count <= options.maxBatchItems && longest * count <= options.maxBatchTokens) {
        current.indices.push(index);
        current.realTokens += cost;
        current.paddedTokens = longest * count;
        continue;
      }
      batches.push(current);
    }
    longest = cost;
    current = { indices: [index], paddedTokens: cost, realTokens: cost };
  }
  if (current !== null) batches.push(current);
  return batches;
}

/** Fraction of computed tokens that were padding. */
export function paddingWaste(batches: readonly PackedBatch[]): number {
  let padded = 0;
  let real = 0;
  for (const batch of batches) {
    padded += batch.paddedTokens;
    real += batch.realTokens;
  }
  return padded === 0 ? 0 : (padded - real) / padded;
}
