import { describe, expect, it } from 'vitest';
import type { RgbPixels } from '../../../../adapters/models/ocr/ocr-crop.js';
import { lineInk, restoreSpaces, widestGap } from '../../../../adapters/models/ocr/ocr-spaces.js';

const HEIGHT = 48;

type Box = [x: number, width: number, top?: number, bottom?: number];

/**
 * A white strip 48 rows high with black boxes for glyphs, each `[x, x + width)` over rows 12–35
 * unless given (the line is 24 rows high), so the empty columns between boxes have known widths.
 */
function strip(width: number, glyphs: readonly Box[], ink = 0, paper = 255): RgbPixels {
  const data = new Uint8Array(width * HEIGHT * 3).fill(paper);
  for (const [x0, w, top = 12, bottom = 36] of glyphs) {
    for (let y = top; y < bottom; y++) data.fill(ink, (y * width + x0) * 3, (y * width + x0 + w) * 3);
  }
  return { data, width, height: HEIGHT };
}

/** A reading whose i-th character was read at the step holding its glyph's middle (4 columns a step). */
function reading(chars: string, glyphs: readonly Box[]): { text: string; chars: string[]; steps: number[] } {
  return { text: chars, chars: [...chars], steps: glyphs.map(([x, w]) => Math.floor((x + w / 2) / 4)) };
}

describe('word spaces from the strip (ocr-spaces)', () => {
  // "AB CD": glyphs 12 wide, 3 columns between letters, 16 (two thirds of the line's height) between words.
  const glyphs: Box[] = [[4, 12], [19, 12], [47, 12], [62, 12]];
  const image = strip(80, glyphs);

  it("finds the line's rows and ink columns, and the widest empty run between two columns", () => {
    const ink = lineInk(image);
    expect(ink?.height).toBe(24);
    const columns = ink?.columns ?? new Uint8Array();
    expect(columns.length).toBe(80);
    expect([...columns.subarray(0, 4)]).toEqual([0, 0, 0, 0]);
    expect([...columns.subarray(4, 16)].every((v) => v === 1)).toBe(true);
    expect(widestGap(columns, 10, 25)).toBe(3);
    expect(widestGap(columns, 25, 53)).toBe(16);
    expect(widestGap(columns, 0, 80)).toBe(16);
  });

  it('puts back a space where the strip shows a word gap and the reading has none', () => {
    expect(restoreSpaces(reading('ABCD', glyphs), image, 4, 0.35)).toBe('AB CD');
    // A gap narrower than the bound (16 < 0.7 × 24) is a letter gap: the reading stays as it was.
    expect(restoreSpaces(reading('ABCD', glyphs), image, 4, 0.7)).toBe('ABCD');
  });

  it("ignores the neighbouring lines' ink at the strip's top and bottom", () => {
    // Descenders of the line above (rows 0–5) and ascenders of the one below (rows 42–47) fill
    // the word gap's columns; blank rows separate them from the line itself.
    const crowded = strip(80, [...glyphs, [30, 14, 0, 6], [28, 18, 42, 48]]);
    expect(lineInk(crowded)?.height).toBe(24);
    expect(restoreSpaces(reading('ABCD', glyphs), crowded, 4, 0.35)).toBe('AB CD');
  });

  it('keeps a space the recognizer read, and adds none beside it', () => {
    const read = { text: 'AB CD', chars: [...'AB CD'], steps: [2, 6, 9, 13, 17] };
    expect(restoreSpaces(read, image, 4, 0.35)).toBe('AB CD');
  });

  it('puts no space before closing or after opening punctuation, nor between CJK characters', () => {
    expect(restoreSpaces(reading('AB.D', glyphs), image, 4, 0.35)).toBe('AB.D');
    expect(restoreSpaces(reading('AB(D', glyphs), image, 4, 0.35)).toBe('AB (D');
    expect(restoreSpaces(reading('A(CD', [[4, 12], [19, 12], [47, 12], [62, 12]]), image, 4, 0.35)).toBe('A(CD');
    expect(restoreSpaces(reading('中文字符', glyphs), image, 4, 0.35)).toBe('中文字符');
    // After a full stop a space is what English puts there.
    expect(restoreSpaces(reading('A.CD', glyphs), image, 4, 0.35)).toBe('A. CD');
  });

  it('splits nothing on a strip without contrast', () => {
    const faint = strip(80, glyphs, 230, 250);
    expect(lineInk(faint)).toBeNull();
    expect(restoreSpaces(reading('ABCD', glyphs), faint, 4, 0.35)).toBe('ABCD');
  });
});
