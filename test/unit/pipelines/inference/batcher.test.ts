import { describe, expect, it } from 'vitest';
import { packBatches, paddingWaste } from '../../../../pipelines/inference/batcher.js';

describe('packBatches', () => {
  it('sorts by length and respects the padded token budget and item cap', () => {
    const costs = [5, 100, 7, 98, 6, 99, 50];
    const batches = packBatches(costs, { maxBatchTokens: 200, maxBatchItems: 3 });
    for (const batch of batches) {
      const lengths = batch.indices.map((i) => costs[i] ?? 0);
      expect(Math.max(...lengths) * lengths.length).toBeLessThanOrEqual(200);
      expect(lengths.length).toBeLessThanOrEqual(3);
      expect(lengths).toEqual([...lengths].sort((a, b) => b - a));
    }
    // 50 is not added to the batch of 98 (half of it would be padding); 5, 6, 7 pad by 2 at most.
    expect(batches.map((b) => b.indices)).toEqual([[1, 5], [3], [6], [2, 4, 0]]);
    expect(batches.flatMap((b) => b.indices).sort((a, b) => a - b)).toEqual([0, 1, 2, 3, 4, 5, 6]);
  });

  it('never refuses an item larger than the budget: it gets a batch of its own', () => {
    const batches = packBatches([10, 5000, 10], { maxBatchTokens: 100, maxBatchItems: 64 });
    expect(batches[0]).toEqual({ indices: [1], paddedTokens: 5000, realTokens: 5000 });
    expect(batches[1]?.indices).toEqual([0, 2]);
  });

  it('keeps padding small on mixed lengths compared with arrival-order batches', () => {
    const costs = Array.from({ length: 400 }, (_, i) => (i % 4 === 0 ? 250 : i % 2 === 0 ? 40 : 12));
    const packed = packBatches(costs, { maxBatchTokens: 2048, maxBatchItems: 64 });
    expect(paddingWaste(packed)).toBeLessThan(0.02);
    // Arrival order in fixed groups of 32 pads everything to the longest (250).
    let padded = 0;
    let real = 0;
    for (let i = 0; i < costs.length; i += 32) {
      const group = costs.slice(i, i + 32);
      padded += Math.max(...group) * group.length;
      real += group.reduce((a, b) => a + b, 0);
    }
    expect((padded - real) / padded).toBeGreaterThan(0.5);
  });

  it('handles an empty input', () => {
    expect(packBatches([], { maxBatchTokens: 10, maxBatchItems: 2 })).toEqual([]);
    expect(paddingWaste([])).toBe(0);
  });
});
