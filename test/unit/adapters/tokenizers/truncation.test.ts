import { describe, expect, it } from 'vitest';
import { cut, longestFirstLengths } from '../../../../adapters/tokenizers/truncation.js';

/**
 * Pair truncation must match the Rust `tokenizers` LongestFirst rule that transformers and
 * sentence-transformers use, including its tie rule. The oracle below is that rule written out
 * step by step (shorter/longer swap, "only the longer is cut", "both are cut"), independently of
 * the closed form in truncation.ts, and the two are compared over every small case.
 */

function rustLongestFirst(lengthA: number, lengthB: number, budget: number): [number, number] {
  if (lengthA + lengthB <= budget) return [lengthA, lengthB];
  let n1 = lengthA;
  let n2 = lengthB;
  const swap = n1 > n2;
  if (swap) [n1, n2] = [n2, n1];
  n2 = n1 > budget ? n1 : Math.max(n1, budget - n1);
  if (n1 + n2 > budget) {
    n1 = Math.floor(budget / 2);
    n2 = n1 + (budget % 2);
  }
  return swap ? [n2, n1] : [n1, n2];
}

describe('longestFirstLengths', () => {
  it.each([
    // [lengthA, lengthB, budget, expected]
    [3, 100, 29, [3, 26]],
    [100, 3, 29, [26, 3]],
    [14, 30, 29, [14, 15]],
    [15, 30, 29, [14, 15]],
    [30, 15, 29, [15, 14]],
    [50, 60, 29, [14, 15]],
    [10, 10, 30, [10, 10]],
    [0, 50, 10, [0, 10]],
    [5, 5, 0, [0, 0]],
  ] as const)('(%i, %i) in a budget of %i keeps %j', (a, b, budget, expected) => {
    expect(longestFirstLengths(a, b, budget)).toEqual(expected);
  });

  it('on a tie gives the first segment floor(budget / 2) and the second the rest', () => {
    expect(longestFirstLengths(20, 20, 29)).toEqual([14, 15]);
    expect(longestFirstLengths(13, 13, 25)).toEqual([12, 13]);
    expect(longestFirstLengths(20, 20, 28)).toEqual([14, 14]);
  });

  it('agrees with the step-by-step Rust rule on every case up to 40 tokens', () => {
    const mismatches: string[] = [];
    for (let a = 0; a <= 40; a++) {
      for (let b = 0; b <= 40; b++) {
        for (let budget = 0; budget <= 40; budget++) {
          const got = longestFirstLengths(a, b, budget);
          const want = rustLongestFirst(a, b, budget);
          if (got[0] !== want[0] || got[1] !== want[1]) mismatches.push(`(${a}, ${b}, ${budget}): ${got.join('/')} vs ${want.join('/')}`);
          if (got[0] + got[1] > Math.max(budget, 0) && a + b > budget) mismatches.push(`(${a}, ${b}, ${budget}) exceeds the budget`);
        }
      }
    }
    expect(mismatches.slice(0, 10)).toEqual([]);
  });
});

describe('cut', () => {
  it('keeps the first tokens on the right side and the last on the left side', () => {
    expect(cut([1, 2, 3, 4, 5], 3, 'right')).toEqual([1, 2, 3]);
    expect(cut([1, 2, 3, 4, 5], 3, 'left')).toEqual([3, 4, 5]);
  });

  it('returns a copy, whole, when nothing has to go', () => {
    const tokens = [1, 2, 3];
    const kept = cut(tokens, 5, 'right');
    expect(kept).toEqual(tokens);
    expect(kept).not.toBe(tokens);
    expect(cut(tokens, 0, 'left')).toEqual([]);
  });
});
