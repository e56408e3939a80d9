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
  /**
   * An item joins the current batch only if it would be padded by at most this fraction of the
   * batch's longest item (or by at most `padSlackTokens`): otherwise the leftover room of a batch of
   * long items would be filled with much shorter ones, which is mostly padding. Default 0.25.
   */
  maxPadRatio?: number;
  /** Padding per item that is always acceptable, whatever the ratio. Default 8 tokens. */
  padSlackTokens?: number;
}

const DEFAULT_MAX_PAD_RATIO = 0.25;
const DEFAULT_PAD_SLACK = 8;

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
  const ratio = options.maxPadRatio ?? DEFAULT_MAX_PAD_RATIO;
  const slack = options.padSlackTokens ?? DEFAULT_PAD_SLACK;
  let current: PackedBatch | null = null;
  let longest = 0;
  for (const index of order) {
    const cost = Math.max(1, costs[index] ?? 1);
    if (current !== null) {
      const count = current.indices.length + 1;
      const padding = longest - cost;
      const similar = padding <= slack || padding <= ratio * longest;
      if (similar && count <= options.maxBatchItems && longest * count <= options.maxBatchTokens) {
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
