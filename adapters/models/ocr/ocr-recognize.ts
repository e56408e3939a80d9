import { ErrorCode, ShoalError } from '../../protocol/errors.js';

/**
 * The recognizer's side of OCR (pure): its character set, greedy CTC decoding of its per-step
 * class probabilities, the angle classifier's verdict, and grouping strips of similar width into
 * batches so little of each batch is padding.
 */

/**
 * The recognizer's classes: index 0 is the CTC blank, then one class per line of the charset
 * file (PaddleOCR's ppocr_keys), then, for models trained with `use_space_char`, the space.
 */
export interface Charset {
  classes: readonly string[];
}

export function parseCharset(text: string, options: { space: boolean }): Charset {
  const lines = text.replace(/^\uFEFF/, '').split(/\r?\n/);
  // A final newline ends the last entry; it is not an entry of its own.
  if (lines.length > 0 && lines[lines.length - 1] === '') lines.pop();
  if (lines.length === 0) throw new ShoalError(ErrorCode.MODEL_LOAD_FAILED, 'the OCR charset file is empty');
  return { classes: ['', ...lines, ...(options.space ? [' '] : [])] };
}

/** Checks the charset against the recognizer's output width, so a mismatched pair fails at load. */
export function checkCharset(charset: Charset, outputClasses: number | null, what: string): void {
  if (outputClasses === null || outputClasses === charset.classes.length) return;
  throw new ShoalError(
    ErrorCode.MODEL_LOAD_FAILED,
    `${what}: the recognizer predicts ${outputClasses} classes but the charset gives ${charset.classes.length} ` +
      '(blank + one per charset line + space); pair the recognizer with its own charset file, or set options.useSpaceChar',
  );
}

export interface Recognized {
  text: string;
  /** Mean probability of the characters kept; 0 when nothing was read. */
  score: number;
  /** The characters kept (charset classes) and the step each was read at: where they stand on the strip. */
  chars: string[];
  steps: number[];
}

/**
 * Greedy CTC decoding of one row of a [n, steps, classes] probability tensor: the best class at
 * each step (the first of equal maxima), then ctcDecodeBest's merge.
 */
export function ctcDecode(probs: Float32Array, row: number, steps: number, charset: Charset): Recognized {
  const classes = charset.classes.length;
  const best = new BigInt64Array(steps);
  const bestProbs = new Float32Array(steps);
  for (let t = 0; t < steps; t++) {
    const base = (row * steps + t) * classes;
    let cls = 0;
    let top = probs[base] ?? 0;
    for (let c = 1; c < classes; c++) {
      const p = probs[base + c] ?? 0;
      if (p > top) {
        cls = c;
        top = p;
      }
    }
    best[t] = BigInt(cls);
    bestProbs[t] = top;
  }
  return ctcDecodeBest(best, bestProbs, 0, steps, charset);
}

/**
 * Greedy CTC decoding of one row from the per-step best class and its probability ([n, steps]
 * each, the outputs addBestClass gives the graph): repeats of a class merged, blanks removed,
 * the score the mean probability of the characters kept.
 */
export function ctcDecodeBest(best: BigInt64Array, probs: Float32Array, row: number, steps: number, charset: Charset): Recognized {
  const chars: string[] = [];
  const at: number[] = [];
  let sum = 0;
  let previous = -1;
  for (let t = 0; t < steps; t++) {
    const index = row * steps + t;
    const cls = Number(best[index] ?? 0n);
    if (cls !== 0 && cls !== previous) {
      chars.push(charset.classes[cls] ?? '');
      at.push(t);
      sum += probs[index] ?? 0;
    }
    previous = cls;
  }
  return { text: chars.join(''), score: chars.length === 0 ? 0 : sum / chars.length, chars, steps: at };
}

/** Words of a reading as a line comparison counts them: runs of letters and digits. */
function wordCount(text: string): number {
  return text.match(/[\p{L}\p{N}]+/gu)?.length ?? 0;
}

/**
 * Whether a line's second reading, from a strip drawn wider than the line's aspect ratio, replaces
 * the first. The recognizer gives each time step a fixed number of strip columns, and in small
 * print a narrow letter gets less than one step and is skipped ("itm" for "item", "fll" for
 * "fill"); a wider strip gives it room. But a wider strip is also read with fewer of the spaces
 * between table cells ("closurepermanent"), so the second reading wins only when it is surer of
 * its characters (higher mean probability) and splits the line into at least as many words.
 */
export function preferWider(first: Recognized, wider: Recognized): boolean {
  return wider.score > first.score && wordCount(wider.text) >= wordCount(first.text);
}

/**
 * The angle classifier's verdict on a strip from its windows' [0°, 180°] probabilities (one row
 * per window): upside down when the mean 180° probability reaches `threshold`. Windows at the
 * recognizer's scale, rather than the whole line squeezed into the classifier's 192 pixels as
 * PaddleOCR does, keep long lines legible to it.
 */
export function isUpsideDown(probs: Float32Array, rows: readonly number[], threshold: number): boolean {
  if (rows.length === 0) return false;
  let flipped = 0;
  for (const row of rows) {
    const upright = probs[row * 2] ?? 1;
    const down = probs[row * 2 + 1] ?? 0;
    flipped += down / Math.max(upright + down, 1e-9);
  }
  return flipped / rows.length >= threshold;
}

/**
 * Indices of the `count` widest strips (ties: page order), the angle classifier's first look at a
 * page; every index when `count` is 0 or covers them all. Wide strips carry the most text, so
 * their verdict is the surest.
 */
export function angleSample(widths: readonly number[], count: number): number[] {
  const all = widths.map((_, index) => index);
  if (count === 0 || count >= widths.length) return all;
  return all.sort((a, b) => (widths[b] ?? 0) - (widths[a] ?? 0) || a - b).slice(0, count);
}

export interface WidthBatchOptions {
  /** Strips per batch. */
  maxItems: number;
  /** Padded columns per batch (widest strip × count). */
  maxColumns: number;
  /** Every strip is padded to at least this width (the recognizer was trained on this width). */
  minWidth: number;
  /** A strip joins a batch only if it fills at least this share of the batch's width. */
  minFill: number;
}

/** Strip indices in batches of similar widths, widest batch first; each batch lists its padded width. */
export function widthBatches(widths: readonly number[], options: WidthBatchOptions): { indices: number[]; width: number }[] {
  const order = widths.map((_, i) => i).sort((a, b) => (widths[b] ?? 0) - (widths[a] ?? 0) || a - b);
  const batches: { indices: number[]; width: number }[] = [];
  let current: { indices: number[]; width: number } | null = null;
  for (const index of order) {
    const width = Math.max(options.minWidth, widths[index] ?? 0);
    const fits =
      current !== null &&
      current.indices.length < options.maxItems &&
      current.width * (current.indices.length + 1) <= options.maxColumns &&
      width >= current.width * options.minFill;
    if (current !== null && fits) {
      current.indices.push(index);
      continue;
    }
    current = { indices: [index], width };
    batches.push(current);
  }
  return batches;
}
