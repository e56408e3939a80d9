import { describe, expect, it } from 'vitest';
import type { Quad } from '../../../../adapters/models/ocr/ocr-geometry.js';
import { pageText, readingRows } from '../../../../adapters/models/ocr/ocr-order.js';

function box(left: number, top: number, right: number, bottom: number): Quad {
  return [[left, top], [right, top], [right, bottom], [left, bottom]];
}

describe('reading order', () => {
  it('reads rows top to bottom and each row left to right, whatever the input order', () => {
    const quads = [
      box(300, 52, 400, 70), // row 2, right
      box(10, 10, 200, 30), // row 1, left
      box(10, 50, 200, 68), // row 2, left
      box(220, 12, 400, 31), // row 1, right (a little lower than its neighbour)
      box(10, 90, 120, 108), // row 3
    ];
    expect(readingRows(quads)).toEqual([[1, 3], [2, 0], [4]]);
    expect(pageText(readingRows(quads), ['d', 'a', 'c', 'b', 'e'])).toBe('a b\nc d\ne');
  });

  it('keeps two columns with offset baselines in separate rows when boxes overlap by less than half', () => {
    const quads = [
      box(10, 10, 200, 30),
      box(250, 22, 450, 42), // overlaps row 1 by 8 of 20 pixels
      box(10, 40, 200, 60),
    ];
    expect(readingRows(quads)).toEqual([[0], [1], [2]]);
  });

  it('does not let a row grow into the next one through a chain of tilted boxes', () => {
    const quads = [box(10, 10, 100, 30), box(110, 18, 200, 38), box(210, 26, 300, 46)];
    // Box 1 overlaps box 0 by 12/20 and joins its row; box 2 overlaps the row's band (box 0) by 4/20 only.
    expect(readingRows(quads)).toEqual([[0, 1], [2]]);
  });

  it('puts a tall box with the row it overlaps most', () => {
    const quads = [box(10, 10, 100, 30), box(10, 40, 100, 60), box(120, 36, 200, 62)];
    expect(readingRows(quads)).toEqual([[0], [1, 2]]);
  });

  it('skips empty readings in the page text', () => {
    expect(pageText([[0, 1], [2]], ['', 'x', ''])).toBe('x');
    expect(readingRows([])).toEqual([]);
  });
});
