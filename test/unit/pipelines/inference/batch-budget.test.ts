import { describe, expect, it } from 'vitest';
import { adaptedBudget, initialBudget } from '../../../../pipelines/inference/batch-budget.js';

describe('initialBudget', () => {
  it('takes the budget tuned on this machine first, then the catalog override, then the default', () => {
    expect(initialBudget({ batchTokens: 4096, profile: { options: { maxBatchTokens: 512 } } }, 1024)).toBe(4096);
    expect(initialBudget({ batchTokens: null, profile: { options: { maxBatchTokens: 512 } } }, 1024)).toBe(512);
    expect(initialBudget({ batchTokens: null, profile: { options: {} } }, 1024)).toBe(1024);
  });

  it('ignores a catalog override that is not a positive number', () => {
    for (const maxBatchTokens of [0, -5, '2048', null]) {
      expect(initialBudget({ batchTokens: null, profile: { options: { maxBatchTokens } } }, 1024)).toBe(1024);
    }
  });
});

describe('adaptedBudget', () => {
  it('leaves the budget alone without a target or a usable timing', () => {
    expect(adaptedBudget(1000, 4096, 1000, 50, null)).toBe(1000);
    expect(adaptedBudget(1000, 4096, 1000, 0, 100)).toBe(1000);
    expect(adaptedBudget(1000, 4096, 0, 50, 100)).toBe(1000);
  });

  it('moves 30 % of the way toward the budget that would take the target time', () => {
    // 1,000 padded tokens in 50 ms: 2,000 tokens would take the 100 ms target.
    expect(adaptedBudget(1000, 4096, 1000, 50, 100)).toBe(1300);
    // Too slow: 1,000 tokens in 200 ms, so 500 would take 100 ms.
    expect(adaptedBudget(1000, 4096, 1000, 200, 100)).toBe(850);
  });

  it('stays between 256 tokens and the ceiling', () => {
    expect(adaptedBudget(300, 4096, 1000, 10_000, 10)).toBe(256);
    expect(adaptedBudget(4000, 4096, 1000, 1, 1000)).toBe(4096);
  });

  it('converges on the target when the throughput holds still', () => {
    let budget = 1024;
    // 20 tokens per ms: the 100 ms target is 2,000 tokens.
    for (let i = 0; i < 40; i++) budget = adaptedBudget(budget, 8192, budget, budget / 20, 100);
    expect(budget).toBeGreaterThanOrEqual(1998);
    expect(budget).toBeLessThanOrEqual(2000);
  });
});
