import type { RgbPixels } from './ocr-crop.js';

/**
 * Word spaces the recognizer left out (pure). PP-OCRv4's recognizer, trained mostly on Chinese
 * where lines have no spaces, often reads a bold heading or a tightly set line of English as one
 * run: "CALLTOORDER/FLAGSALUTE", "itmoranyitemnotonthe". The strip itself still shows each
 * space: a run of columns without ink between two characters, wider than the gap between two
 * letters of a word. Greedy CTC decoding says at which step each character was read, a step
 * covers a fixed number of strip columns, so the gap between two consecutive characters can be
 * measured on the strip; where it is at least `minGap` times the line's height wide and the
 * recognizer put no space there, one is put back.
 *
 * Never before closing punctuation or after opening punctuation (a reading step can sit past a
 * full stop, so the gap measured before one may include the space after it), never next to a
 * straight quote (open or close, nobody knows), and never between CJK characters, whose scripts
 * put no spaces between words.
 */

/** Characters of one greedy CTC reading and the step at which each was read. */
export interface ReadCharacters {
  text: string;
  chars: readonly string[];
  steps: readonly number[];
}

/** Below this contrast between a strip's background and its darkest ink, no column is called empty. */
const MIN_CONTRAST = 48;

const NO_SPACE_BEFORE = new Set([...'.,;:!?)]}%\'"’”，。、；：！？）】》」』']);
const NO_SPACE_AFTER = new Set([...'([{\'"‘“（【《「『']);
const UNSPACED_SCRIPT = /[\p{Script=Han}\p{Script=Hiragana}\p{Script=Katakana}\p{Script=Hangul}]/u;

/** Where a strip's own line of text has ink. */
export interface LineInk {
  /** Per strip column: 1 where the line has ink in it, 0 where it has none. */
  columns: Uint8Array;
  /** Rows the line spans, ascenders to descenders. */
  height: number;
}

/**
 * The ink of the line a strip was cut for. A pixel is ink when darker than halfway between the
 * strip's background (its 90th luminance percentile) and its ink (the 2nd). Detector boxes are
 * grown past the line, so a strip often holds the bottom of the line above and the top of the
 * one below, whose letters would fill the line's word gaps: the line is the run of rows with ink
 * around the inkiest row of the strip's middle half, up to the first rows without any, and only
 * its rows count. Null when the strip has too little contrast to tell (blank, a photo) or is
 * light text on a dark ground: nothing in it is split.
 */
export function lineInk(strip: RgbPixels): LineInk | null {
  const { data, width, height } = strip;
  const pixels = width * height;
  const luminance = new Uint8Array(pixels);
  const histogram = new Uint32Array(256);
  for (let pixel = 0; pixel < pixels; pixel++) {
    const at = pixel * 3;
    const level = (((data[at] ?? 0) * 299 + (data[at + 1] ?? 0) * 587 + (data[at + 2] ?? 0) * 114 + 500) / 1000) | 0;
    luminance[pixel] = level;
    histogram[level] = (histogram[level] ?? 0) + 1;
  }
  const darkest = percentileOf(histogram, pixels, 0.02);
  const background = percentileOf(histogram, pixels, 0.9);
  if (background - darkest < MIN_CONTRAST) return null;
  const threshold = (background + darkest) / 2;
  const inkInRow = new Uint32Array(height);
  for (let y = 0; y < height; y++) {
    let count = 0;
    for (let x = y * width; x < (y + 1) * width; x++) if ((luminance[x] ?? 255) < threshold) count++;
    inkInRow[y] = count;
  }
  let center = height >> 1;
  for (let y = height >> 2; y < (3 * height) >> 2; y++) if ((inkInRow[y] ?? 0) > (inkInRow[center] ?? 0)) center = y;
  let top = center;
  let bottom = center;
  while (top > 0 && (inkInRow[top - 1] ?? 0) > 0) top--;
  while (bottom < height - 1 && (inkInRow[bottom + 1] ?? 0) > 0) bottom++;
  const columns = new Uint8Array(width);
  for (let y = top; y <= bottom; y++) {
    const row = y * width;
    for (let x = 0; x < width; x++) if ((luminance[row + x] ?? 255) < threshold) columns[x] = 1;
  }
  return { columns, height: bottom - top + 1 };
}

function percentileOf(histogram: Uint32Array, total: number, share: number): number {
  const wanted = Math.max(1, Math.ceil(total * share));
  let seen = 0;
  for (let level = 0; level < histogram.length; level++) {
    seen += histogram[level] ?? 0;
    if (seen >= wanted) return level;
  }
  return histogram.length - 1;
}

/** The longest run of empty columns in [from, to). */
export function widestGap(ink: Uint8Array, from: number, to: number): number {
  let widest = 0;
  let run = 0;
  for (let x = Math.max(0, from); x < Math.min(ink.length, to); x++) {
    run = ink[x] === 0 ? run + 1 : 0;
    if (run > widest) widest = run;
  }
  return widest;
}

function mayTakeSpace(before: string, after: string): boolean {
  if (before === ' ' || after === ' ' || before === '' || after === '') return false;
  if (NO_SPACE_AFTER.has(before) || NO_SPACE_BEFORE.has(after)) return false;
  return !UNSPACED_SCRIPT.test(before) && !UNSPACED_SCRIPT.test(after);
}

/**
 * The reading's text with a space wherever two consecutive characters stand at least `minGap` ×
 * the line's height apart on empty columns. `columnsPerStep`: strip columns per recognizer step
 * (the batch's padded width over its steps). The empty run is looked for between the middles of
 * the two characters' steps, where the first one's right edge and the second's left edge lie.
 */
export function restoreSpaces(read: ReadCharacters, strip: RgbPixels, columnsPerStep: number, minGap: number): string {
  let ink: LineInk | null | undefined;
  let text = '';
  let changed = false;
  for (let index = 0; index < read.chars.length; index++) {
    const char = read.chars[index] ?? '';
    if (index > 0 && mayTakeSpace(read.chars[index - 1] ?? '', char)) {
      ink = ink === undefined ? lineInk(strip) : ink;
      if (ink === null) return read.text;
      const from = Math.floor(((read.steps[index - 1] ?? 0) + 0.5) * columnsPerStep);
      const to = Math.ceil(((read.steps[index] ?? 0) + 0.5) * columnsPerStep);
      if (widestGap(ink.columns, from, to) >= minGap * ink.height) {
        text += ' ';
        changed = true;
      }
    }
    text += char;
  }
  return changed ? text : read.text;
}
