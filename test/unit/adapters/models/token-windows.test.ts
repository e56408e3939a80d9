import { describe, expect, it } from 'vitest';
import { defaultOverlap, planWindows } from '../../../../adapters/models/token-classification/token-windows.js';

describe('planWindows', () => {
  it('a sequence that fits is one window keeping everything', () => {
    expect(planWindows(10, 10, 2)).toEqual([{ start: 0, end: 10, keepStart: 0, keepEnd: 10 }]);
    expect(planWindows(0, 10, 2)).toEqual([{ start: 0, end: 0, keepStart: 0, keepEnd: 0 }]);
  });

  it('steps by window - overlap, aligns the last window to the end, and splits overlaps in the middle', () => {
    expect(planWindows(14, 6, 1)).toEqual([
      { start: 0, end: 6, keepStart: 0, keepEnd: 5 },
      { start: 5, end: 11, keepStart: 5, keepEnd: 9 },
      { start: 8, end: 14, keepStart: 9, keepEnd: 14 },
    ]);
    expect(planWindows(20, 8, 0).map((w) => [w.start, w.end, w.keepStart, w.keepEnd])).toEqual([
      [0, 8, 0, 8],
      [8, 16, 8, 14],
      [12, 20, 14, 20],
    ]);
  });

  it('keep ranges partition the sequence, lie inside their windows, and leave context on both sides', () => {
    for (const [length, size, overlap] of [
      [1000, 510, defaultOverlap(510)],
      [513, 510, 127],
      [37, 5, 4],
      [37, 5, 9],
      [100, 1, 0],
    ] as const) {
      const windows = planWindows(length, size, overlap);
      let next = 0;
      for (const [k, w] of windows.entries()) {
        expect(w.end - w.start).toBe(Math.min(size, length));
        expect(w.keepStart).toBe(next);
        expect(w.keepStart).toBeGreaterThanOrEqual(w.start);
        expect(w.keepEnd).toBeLessThanOrEqual(w.end);
        const shared = Math.min(overlap, size - 1);
        // Context before/after a kept token is at least half the overlap, except at the text's ends.
        if (k > 0) expect(w.keepStart - w.start).toBeGreaterThanOrEqual(Math.floor(shared / 2));
        if (k < windows.length - 1) expect(w.end - w.keepEnd).toBeGreaterThanOrEqual(Math.floor(shared / 2));
        next = w.keepEnd;
      }
      expect(next).toBe(length);
    }
  });
});
