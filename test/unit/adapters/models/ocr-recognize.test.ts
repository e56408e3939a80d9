import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { angleSample, checkCharset, ctcDecode, ctcDecodeBest, isUpsideDown, parseCharset, preferWider, widthBatches, type Recognized } from '../../../../adapters/models/ocr/ocr-recognize.js';
import { ErrorCode, ShoalError } from '../../../../adapters/protocol/errors.js';

/** One row of per-step probabilities: at each step `best` gets `p`, the rest share what is left. */
function steps(classes: number, picks: [best: number, p: number][]): Float32Array {
  const out = new Float32Array(picks.length * classes);
  picks.forEach(([best, p], t) => {
    for (let c = 0; c < classes; c++) out[t * classes + c] = c === best ? p : (1 - p) / (classes - 1);
  });
  return out;
}

describe('charset', () => {
  it('puts the CTC blank first and the space last; a final newline and a BOM are not characters', () => {
    expect(parseCharset('\uFEFFa\r\nb\nc\n', { space: true }).classes).toEqual(['', 'a', 'b', 'c', ' ']);
    expect(parseCharset('a\nb', { space: false }).classes).toEqual(['', 'a', 'b']);
  });

  it('keeps a line holding a space as a character (some charsets list it)', () => {
    expect(parseCharset('a\n \nb\n', { space: false }).classes).toEqual(['', 'a', ' ', 'b']);
  });

  it('refuses a charset that does not match the recognizer output', () => {
    const charset = parseCharset('a\nb\n', { space: true });
    expect(() => checkCharset(charset, 4, 'm')).not.toThrow();
    expect(() => checkCharset(charset, null, 'm')).not.toThrow();
    try {
      checkCharset(charset, 6625, 'm');
      throw new Error('expected a failure');
    } catch (error) {
      expect(error instanceof ShoalError && error.code).toBe(ErrorCode.MODEL_LOAD_FAILED);
    }
    expect(() => parseCharset('', { space: true })).toThrow(/empty/);
  });
});

describe('CTC greedy decoding', () => {
  const charset = parseCharset('a\nb\nc\n', { space: true }); // classes: blank a b c space
  const C = charset.classes.length;

  it('merges repeats, keeps a repeat split by a blank, drops blanks', () => {
    const probs = steps(C, [[1, 0.9], [1, 0.8], [0, 0.9], [1, 0.7], [2, 0.6], [2, 0.9], [4, 0.5], [3, 1], [0, 0.9]]);
    const read = ctcDecode(probs, 0, 9, charset);
    expect(read.text).toBe('aab c');
    // Each kept character with the step it was read at: where it stands on the strip.
    expect(read.chars).toEqual(['a', 'a', 'b', ' ', 'c']);
    expect(read.steps).toEqual([0, 3, 4, 6, 7]);
    // Each kept character scores the probability at the step it was emitted.
    expect(read.score).toBeCloseTo((0.9 + 0.7 + 0.6 + 0.5 + 1) / 5, 6);
  });

  it('reads the requested row of a batch', () => {
    const rows = new Float32Array([...steps(C, [[3, 0.9], [0, 1]]), ...steps(C, [[2, 0.8], [1, 0.6]])]);
    expect(ctcDecode(rows, 0, 2, charset).text).toBe('c');
    expect(ctcDecode(rows, 1, 2, charset)).toEqual({ text: 'ba', score: expect.closeTo(0.7, 6), chars: ['b', 'a'], steps: [0, 1] });
  });

  it('gives an empty reading score 0', () => {
    expect(ctcDecode(steps(C, [[0, 1], [0, 1]]), 0, 2, charset)).toEqual({ text: '', score: 0, chars: [], steps: [] });
  });

  it('reads the same from the per-step best class and probability as from the full probabilities', () => {
    const pick = fc.tuple(fc.integer({ min: 0, max: C - 1 }), fc.float({ min: Math.fround(0.3), max: 1, noNaN: true }));
    fc.assert(
      fc.property(fc.array(fc.array(pick, { minLength: 1, maxLength: 12 }), { minLength: 1, maxLength: 4 }), (rows) => {
        const length = Math.max(...rows.map((row) => row.length));
        // Rows padded with blanks to one step count, as a batch is.
        const padded = rows.map((row) => [...row, ...Array.from({ length: length - row.length }, (): [number, number] => [0, 1])]);
        const probs = Float32Array.from(padded.flatMap((row) => [...steps(C, row)]));
        const best = BigInt64Array.from(padded.flatMap((row) => row.map(([cls]) => BigInt(cls))));
        const top = Float32Array.from(padded.flatMap((row) => row.map(([, p]) => p)));
        padded.forEach((_, row) => {
          const full = ctcDecode(probs, row, length, charset);
          const fromBest = ctcDecodeBest(best, top, row, length, charset);
          expect(fromBest.text).toBe(full.text);
          expect(fromBest.steps).toEqual(full.steps);
          expect(fromBest.score).toBeCloseTo(full.score, 5);
        });
      }),
    );
  });
});

describe('angle classifier verdict', () => {
  const probs = new Float32Array([0.95, 0.05, 0.02, 0.98, 0.1, 0.9, 0.2, 0.8]);
  it('averages the 180° probability over a strip\'s windows', () => {
    expect(isUpsideDown(probs, [1, 2], 0.9)).toBe(true); // mean 0.94
    expect(isUpsideDown(probs, [1, 3], 0.9)).toBe(false); // mean 0.89
    expect(isUpsideDown(probs, [0], 0.5)).toBe(false);
    expect(isUpsideDown(probs, [], 0.5)).toBe(false);
  });
});

describe('width batches', () => {
  it('groups strips of similar width, widest first, padded to at least the minimum width', () => {
    const widths = [100, 900, 850, 300, 320, 2000];
    const batches = widthBatches(widths, { maxItems: 2, maxColumns: 10_000, minWidth: 320, minFill: 0.6 });
    expect(batches).toEqual([
      { indices: [5], width: 2000 }, // 900 fills less than 60 % of 2000
      { indices: [1, 2], width: 900 },
      { indices: [4, 3], width: 320 },
      { indices: [0], width: 320 },
    ]);
  });

  it('caps a batch by padded columns', () => {
    const batches = widthBatches([500, 500, 500], { maxItems: 8, maxColumns: 1000, minWidth: 320, minFill: 0.5 });
    expect(batches.map((b) => b.indices)).toEqual([[0, 1], [2]]);
  });

  it('batches narrow strips (line numbers, short words) at a narrow minimum width instead of 320', () => {
    const widths = [40, 60, 90, 110, 700];
    const batches = widthBatches(widths, { maxItems: 8, maxColumns: 5120, minWidth: 128, minFill: 0.6 });
    expect(batches).toEqual([
      { indices: [4], width: 700 },
      { indices: [3, 2, 1, 0], width: 128 },
    ]);
    const padded = batches.reduce((sum, b) => sum + b.width * b.indices.length, 0);
    expect(padded).toBe(700 + 4 * 128); // 1,212 columns, against 700 + 4 × 320 = 1,980 at a 320 minimum
  });

  it('keeps every strip once, and padding within the fill bound, for any widths', () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 1, max: 2400 }), { maxLength: 200 }), fc.integer({ min: 16, max: 400 }), (widths, minWidth) => {
        const options = { maxItems: 8, maxColumns: 8 * 640, minWidth, minFill: 0.6 };
        const batches = widthBatches(widths, options);
        expect(batches.flatMap((b) => b.indices).sort((a, b) => a - b)).toEqual(widths.map((_, i) => i));
        for (const batch of batches) {
          const members = batch.indices.map((i) => Math.max(minWidth, widths[i] ?? 0));
          expect(batch.width).toBe(Math.max(...members));
          expect(batch.indices.length).toBeLessThanOrEqual(options.maxItems);
          if (batch.indices.length > 1) expect(batch.width * batch.indices.length).toBeLessThanOrEqual(options.maxColumns);
          for (const width of members) expect(width).toBeGreaterThanOrEqual(options.minFill * batch.width);
        }
      }),
      { numRuns: 200 },
    );
  });
});

describe('angleSample', () => {
  it('picks the widest strips, ties in page order', () => {
    expect(angleSample([100, 400, 250, 400, 90], 3)).toEqual([1, 3, 2]);
  });

  it('takes every strip, in page order, when the sample is 0 or covers the page', () => {
    expect(angleSample([100, 400, 250], 0)).toEqual([0, 1, 2]);
    expect(angleSample([100, 400, 250], 3)).toEqual([0, 1, 2]);
    expect(angleSample([100, 400, 250], 16)).toEqual([0, 1, 2]);
    expect(angleSample([], 16)).toEqual([]);
  });

  it('never repeats a strip and never picks a narrower one over a wider one left out', () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 1, max: 3000 }), { maxLength: 60 }), fc.integer({ min: 1, max: 20 }), (widths, count) => {
        const picked = angleSample(widths, count);
        expect(new Set(picked).size).toBe(picked.length);
        expect(picked).toHaveLength(Math.min(count, widths.length));
        const narrowest = Math.min(...picked.map((i) => widths[i] ?? 0));
        const left = widths.filter((_, i) => !picked.includes(i));
        for (const width of left) expect(width).toBeLessThanOrEqual(narrowest);
      }),
    );
  });
});

describe('second reading from a wider strip', () => {
  const reading = (text: string, score: number): Recognized => ({ text, score, chars: [...text], steps: [...text].map((_, i) => i) });

  it('replaces the first when it is surer and keeps the words apart (Cupertino\'s skipped narrow letters)', () => {
    expect(preferWider(reading('on any agenda itm or any item', 0.899), reading('on any agenda item or any item', 0.926))).toBe(true);
    expect(preferWider(reading('their alloted time', 0.94), reading('their allotted time', 0.961))).toBe(true);
    // Punctuation does not count as a word: "agenda lease" and "agenda, please" are both two.
    expect(preferWider(reading('agenda lease fll out', 0.9), reading('agenda, please fill out', 0.93))).toBe(true);
    // A space found where the first reading ran two words together counts for the second.
    expect(preferWider(reading('PublicComments', 0.95), reading('Public Comments', 0.96))).toBe(true);
  });

  it('keeps the first when the second is less sure, or runs words together (table cells)', () => {
    expect(preferWider(reading('comments wil l be limited', 0.959), reading('comments will be limited', 0.948))).toBe(false);
    expect(preferWider(reading('closure permanent', 0.9), reading('closurepermanent', 0.97))).toBe(false);
    expect(preferWider(reading('same', 0.9), reading('same', 0.9))).toBe(false);
    expect(preferWider(reading('x', 0.5), reading('', 0))).toBe(false);
  });
});
