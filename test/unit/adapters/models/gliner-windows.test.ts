import { describe, expect, it } from 'vitest';
import type { GlinerWindow } from '../../../../adapters/models/family.js';
import { decodeFlat, ownsSpan } from '../../../../adapters/models/gliner/gliner-decode.js';
import { planWindows, splitWords, type WindowLimits, type WordRange } from '../../../../adapters/models/gliner/gliner-input.js';

/** GLiNER word splitting, window planning for long texts, span ownership and greedy decoding. */

function sum(lengths: readonly number[], range: WordRange): number {
  return lengths.slice(range.first, range.end).reduce((a, b) => a + b, 0);
}

function limits(budget: number, maxWords: number, overlapWords: number): WindowLimits {
  return { budget, maxWords, overlapWords, spanWords: 12 };
}

function asWindows(ranges: readonly WordRange[]): GlinerWindow[] {
  return ranges.map((r) => ({ tokens: [0, 0], firstWord: r.first, wordCount: r.end - r.first }));
}

describe('splitWords', () => {
  it("follows Python's \\w+(?:[-_]\\w+)*|\\S with Unicode \\w and Python's whitespace set", () => {
    const text = 'State-of-the-art NER (born 5 Feb.) café_au_lait Ⅻ²\u001cx\ufeff';
    const words = splitWords(text).map(([s, e]) => text.slice(s, e));
    expect(words).toEqual(['State-of-the-art', 'NER', '(', 'born', '5', 'Feb', '.', ')', 'café_au_lait', 'Ⅻ²', 'x', '\ufeff']);
  });

  it('keeps combining marks out of words, as Python does', () => {
    expect(splitWords('e\u0301').map(([s, e]) => 'e\u0301'.slice(s, e))).toEqual(['e', '\u0301']);
  });
});

describe('planWindows', () => {
  it('keeps a text that fits in one window whole', () => {
    expect(planWindows([1, 2, 3], limits(10, 384, 24))).toEqual([{ first: 0, end: 3 }]);
    expect(planWindows([], limits(10, 384, 24))).toEqual([]);
  });

  it('cuts by word count with the requested overlap', () => {
    const lengths = new Array<number>(100).fill(1);
    const windows = planWindows(lengths, limits(1000, 40, 12));
    expect(windows).toEqual([
      { first: 0, end: 40 },
      { first: 28, end: 68 },
      { first: 56, end: 96 },
      { first: 84, end: 100 },
    ]);
  });

  it('respects the token budget, covers every word and puts every short span whole in some window', () => {
    const lengths = Array.from({ length: 500 }, (_, i) => 1 + ((i * 7) % 5));
    // About 20 words a window: half a window is less than 11 words, the overlap still reaches 11.
    const budget = 60;
    const windows = planWindows(lengths, limits(budget, 384, 24));
    for (const [i, w] of windows.entries()) {
      expect(sum(lengths, w)).toBeLessThanOrEqual(budget);
      if (i > 0) {
        expect(w.first).toBeGreaterThan(windows[i - 1]?.first ?? -1);
        expect(w.end).toBeGreaterThan(windows[i - 1]?.end ?? -1);
        expect(w.first).toBeLessThanOrEqual(windows[i - 1]?.end ?? -1);
      }
    }
    expect(windows[0]?.first).toBe(0);
    expect(windows.at(-1)?.end).toBe(500);
    for (let s = 0; s < 500; s++) {
      for (let e = s; e < Math.min(500, s + 12); e++) {
        expect(windows.some((w) => w.first <= s && e < w.end), `span ${s}..${e}`).toBe(true);
      }
    }
  });

  it('overlaps small windows by span width - 1 words, and by none when asked', () => {
    const lengths = new Array<number>(40).fill(1);
    expect(planWindows(lengths, limits(1000, 16, 24))).toEqual([
      { first: 0, end: 16 },
      { first: 5, end: 21 },
      { first: 10, end: 26 },
      { first: 15, end: 31 },
      { first: 20, end: 36 },
      { first: 25, end: 40 },
    ]);
    expect(planWindows(lengths, limits(1000, 16, 0))).toEqual([
      { first: 0, end: 16 },
      { first: 16, end: 32 },
      { first: 32, end: 40 },
    ]);
  });

  it('gives a word longer than the budget a window of its own and moves on', () => {
    expect(planWindows([2, 50, 2, 2], limits(10, 384, 24))).toEqual([
      { first: 0, end: 1 },
      { first: 1, end: 2 },
      { first: 2, end: 4 },
    ]);
  });
});

describe('ownsSpan', () => {
  it('gives each span to exactly one window, the one where it sits farthest from a cut', () => {
    const ranges = planWindows(new Array<number>(100).fill(1), limits(1000, 40, 12));
    const windows = asWindows(ranges);
    for (let s = 0; s < 100; s++) {
      for (let e = s; e < Math.min(100, s + 12); e++) {
        const owners = windows.map((_, i) => i).filter((i) => {
          const w = ranges[i];
          return w !== undefined && w.first <= s && e < w.end && ownsSpan(windows, i, 100, s, e);
        });
        expect(owners, `span ${s}..${e}`).toHaveLength(1);
      }
    }
    // Words 28..39 are in windows 0 and 1: a span near 39 (window 0's cut) belongs to window 1.
    expect(ownsSpan(windows, 0, 100, 37, 38)).toBe(false);
    expect(ownsSpan(windows, 1, 100, 37, 38)).toBe(true);
    expect(ownsSpan(windows, 0, 100, 29, 30)).toBe(true);
  });
});

describe('decodeFlat', () => {
  it('keeps the best spans that share no word, in position order; ties in enumeration order', () => {
    const kept = decodeFlat(
      [
        { start: 0, end: 2, label: 0, score: 0.7 },
        { start: 2, end: 3, label: 1, score: 0.9 },
        { start: 0, end: 1, label: 0, score: 0.6 },
        { start: 5, end: 5, label: 1, score: 0.6 },
        { start: 5, end: 5, label: 0, score: 0.6 },
      ],
      8,
    );
    expect(kept).toEqual([
      { start: 0, end: 1, label: 0, score: 0.6 },
      { start: 2, end: 3, label: 1, score: 0.9 },
      { start: 5, end: 5, label: 0, score: 0.6 },
    ]);
  });
});
