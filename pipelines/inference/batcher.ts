/**
 * Length-aware batch packing (pure): items are sorted by token count and cut into batches whose
 * padded cost (longest item × items) stays within a token budget, so similar lengths travel
 * together and padding stays small. An item larger than the budget still gets a batch of its own:
 * a big request is split, never refused. The two rules (`fitsBudget`, `similarLength`) are the
 * ones the scheduler's work queue cuts its batches by; `packBatches` applies them to a whole list
 * at once (the benchmark ceiling packs its batches exactly as Shoal does).
 */

export interface BatchLimits {
  /** Padded tokens per batch (longest sequence × batch size). */
  maxBatchTokens: number;
  maxBatchItems: number;
}

export interface LengthRule {
  /** Largest padding of an item, as a fraction of the batch's longest item. */
  maxPadRatio: number;
  /** Padding per item that is always acceptable, whatever the ratio. */
  padSlackTokens: number;
}

/** Whether a batch of `count` items, the longest `longest` tokens, stays within the limits. */
export function fitsBudget(longest: number, count: number, limits: BatchLimits): boolean {
  return count <= limits.maxBatchItems && longest * count <= limits.maxBatchTokens;
}

/**
 * Whether an item of `cost` tokens may join a batch whose longest item has `longest`: otherwise
 * the leftover room of a batch of long items would be filled with much shorter ones, which is
 * mostly padding.
 */
export function similarLength(longest: number, cost: number, rule: LengthRule): boolean {
  const padding = longest - cost;
  return padding <= rule.padSlackTokens || padding <= rule.maxPadRatio * longest;
}

export interface PackOptions extends BatchLimits, Partial<LengthRule> {}

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
  const rule: LengthRule = { maxPadRatio: options.maxPadRatio ?? DEFAULT_MAX_PAD_RATIO, padSlackTokens: options.padSlackTokens ?? DEFAULT_PAD_SLACK };
  let current: PackedBatch | null = null;
  let longest = 0;
  for (const index of order) {
    const cost = Math.max(1, costs[index] ?? 1);
    if (current !== null) {
      const count = current.indices.length + 1;
      if (similarLength(longest, cost, rule) && fitsBudget(longest, count, options)) {
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
