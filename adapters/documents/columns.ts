import { groupLines, inkChars, type TextRun } from './text-lines.js';

/**
 * Reading order of a page's text runs across columns. A column gutter is a vertical band that
 * text crosses over only a small part of the page's height (a full-width title or abstract may
 * cross it); the page is then cut into bands at the lines that span the gutter, and each band is
 * read left column first, then right, recursively (three columns are two cuts). Tables, which
 * also have empty vertical bands, are told apart by their short cells and by having many such
 * bands, and are left to be read row by row.
 */

/** The page is scanned for gutters in bins of this many points. */
const BIN = 1;
/**
 * A bin is part of a gutter when its ink is at most this share of a typical inked bin's (the
 * median): the lines spanning a gutter (title, authors, a centred page number) are few next to
 * a column's lines. Generous on purpose: a candidate must still pass the prose test of splitAt.
 */
const GUTTER_INK = 0.5;
/** Each side of a gutter must hold this share of the characters. */
const MIN_SIDE_SHARE = 0.15;
/** Prose columns have lines of this many characters (median); table cells are shorter. */
const MIN_MEDIAN_LINE_CHARS = 20;
const MIN_SIDE_LINES = 3;
/** More candidate gutters than this on one page: a table or form, not columns. */
const MAX_GUTTERS = 3;
const MAX_DEPTH = 3;

interface Gutter {
  start: number;
  end: number;
}

function median(values: number[]): number {
  if (values.length === 0) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? 0;
}

/** Interior bands of the x axis where almost no text is drawn, widest first. */
function candidateGutters(runs: readonly TextRun[]): Gutter[] {
  let left = Infinity;
  let right = -Infinity;
  for (const run of runs) {
    left = Math.min(left, run.x);
    right = Math.max(right, run.x + run.width);
  }
  const bins = Math.ceil((right - left) / BIN);
  if (!Number.isFinite(bins) || bins < 20) return [];
  // Ink per bin: the font size of every run covering it, so a bin crossed by every line of a
  // column scores high and one crossed only by a title scores low. A difference array keeps it linear.
  const delta = new Float64Array(bins + 1);
  for (const run of runs) {
    const from = Math.max(0, Math.floor((run.x - left) / BIN));
    const to = Math.min(bins, Math.ceil((run.x + run.width - left) / BIN));
    if (to <= from) continue;
    delta[from] = (delta[from] ?? 0) + run.size;
    delta[to] = (delta[to] ?? 0) - run.size;
  }
  const ink = new Float64Array(bins);
  const inked: number[] = [];
  let running = 0;
  for (let bin = 0; bin < bins; bin++) {
    running += delta[bin] ?? 0;
    ink[bin] = running;
    if (running > 0) inked.push(running);
  }
  const typical = median(inked);
  const minWidth = Math.max(6, 0.8 * median(runs.map((run) => run.size)));
  const gutters: Gutter[] = [];
  let start = -1;
  for (let bin = 0; bin <= bins; bin++) {
    const empty = bin < bins && (ink[bin] ?? 0) <= GUTTER_INK * typical;
    if (empty && start < 0) start = bin;
    if (!empty && start >= 0) {
      // Bands touching the page's text edges are margins, not gutters.
      if (start > 0 && bin < bins && (bin - start) * BIN >= minWidth) gutters.push({ start: left + start * BIN, end: left + bin * BIN });
      start = -1;
    }
  }
  return gutters.sort((a, b) => b.end - b.start - (a.end - a.start));
}

type Side = 'left' | 'right' | 'span';

/**
 * Where a run lies relative to the gutter: a run reaching well into both sides spans it (a title);
 * one that only overhangs it belongs to the side holding most of it.
 */
function sideOf(run: TextRun, gutter: Gutter, leftWidth: number, rightWidth: number): Side {
  const end = run.x + run.width;
  if (end <= gutter.end && run.x >= gutter.start) return 'span';
  if (end <= (gutter.start + gutter.end) / 2) return 'left';
  if (run.x >= (gutter.start + gutter.end) / 2) return 'right';
  const intoLeft = gutter.start - run.x;
  const intoRight = end - gutter.end;
  if (intoLeft >= 0.1 * leftWidth && intoRight >= 0.1 * rightWidth) return 'span';
  return intoLeft >= intoRight ? 'left' : 'right';
}

function proseLike(runs: readonly TextRun[]): boolean {
  const lines = groupLines(runs);
  if (lines.length < MIN_SIDE_LINES) return false;
  return median(lines.map((line) => line.text.length)) >= MIN_MEDIAN_LINE_CHARS;
}

interface Split {
  left: TextRun[];
  right: TextRun[];
  span: TextRun[];
}

function splitAt(runs: readonly TextRun[], gutter: Gutter): Split | null {
  let minX = Infinity;
  let maxX = -Infinity;
  for (const run of runs) {
    minX = Math.min(minX, run.x);
    maxX = Math.max(maxX, run.x + run.width);
  }
  const split: Split = { left: [], right: [], span: [] };
  for (const run of runs) split[sideOf(run, gutter, gutter.start - minX, maxX - gutter.end)].push(run);
  const total = runs.reduce((sum, run) => sum + inkChars(run), 0);
  const leftChars = split.left.reduce((sum, run) => sum + inkChars(run), 0);
  const rightChars = split.right.reduce((sum, run) => sum + inkChars(run), 0);
  if (leftChars < MIN_SIDE_SHARE * total || rightChars < MIN_SIDE_SHARE * total) return null;
  if (!proseLike(split.left) || !proseLike(split.right)) return null;
  return split;
}

/**
 * Runs grouped into blocks in reading order: one block per column segment, and full-width lines
 * (those spanning a gutter) as blocks of their own between the bands they separate.
 */
export function orderColumns(runs: readonly TextRun[], depth = 0): TextRun[][] {
  if (runs.length === 0) return [];
  if (depth >= MAX_DEPTH) return [[...runs]];
  const gutters = candidateGutters(runs);
  if (gutters.length === 0 || gutters.length > MAX_GUTTERS) return [[...runs]];
  let split: Split | null = null;
  for (const gutter of gutters) {
    split = splitAt(runs, gutter);
    if (split !== null) break;
  }
  if (split === null) return [[...runs]];
  const spanning = groupLines(split.span);
  const bandOf = (run: TextRun): number => {
    let band = 0;
    while (band < spanning.length && (spanning[band]?.y ?? Infinity) < run.y) band++;
    return band;
  };
  const bands: { left: TextRun[]; right: TextRun[] }[] = Array.from({ length: spanning.length + 1 }, () => ({ left: [], right: [] }));
  for (const run of split.left) bands[bandOf(run)]?.left.push(run);
  for (const run of split.right) bands[bandOf(run)]?.right.push(run);
  const blocks: TextRun[][] = [];
  bands.forEach((band, index) => {
    blocks.push(...orderColumns(band.left, depth + 1), ...orderColumns(band.right, depth + 1));
    const line = spanning[index];
    if (line !== undefined) blocks.push(line.runs);
  });
  return blocks.filter((block) => block.length > 0);
}
