/**
 * Text runs (pieces of text a PDF draws, in page coordinates) grouped into lines: runs whose
 * baselines are within half a font size of each other are one line, read left to right.
 */

export interface TextRun {
  text: string;
  /** Left edge, in points from the page's left side. */
  x: number;
  /** Baseline, in points from the page's top (y grows downwards). */
  y: number;
  /** Advance along x, in points. */
  width: number;
  /** Font size in points (the glyphs' height). */
  size: number;
}

export interface TextLine {
  runs: TextRun[];
  /** Baseline of the line's first (leftmost after sorting by y) run. */
  y: number;
  /** The largest font size on the line. */
  size: number;
  x: number;
  right: number;
  text: string;
}

/** A gap wider than this share of the font size between two runs is a word space. */
const SPACE_GAP = 0.15;

function joinRuns(runs: readonly TextRun[]): string {
  let text = '';
  let previous: TextRun | null = null;
  for (const run of runs) {
    if (previous !== null) {
      // Some generators draw a glyph run twice (fake bold or shadow): keep one.
      if (run.text === previous.text && Math.abs(run.x - previous.x) < 0.5 * run.size) continue;
      const gap = run.x - (previous.x + previous.width);
      const boundaryHasSpace = /\s$/.test(text) || /^\s/.test(run.text);
      if (!boundaryHasSpace && gap > SPACE_GAP * Math.min(run.size, previous.size)) text += ' ';
    }
    text += run.text;
    previous = run;
  }
  return text.replace(/\s+/g, ' ').trim();
}

function finishLine(runs: TextRun[]): TextLine {
  runs.sort((a, b) => a.x - b.x);
  let size = 0;
  let right = -Infinity;
  for (const run of runs) {
    size = Math.max(size, run.size);
    right = Math.max(right, run.x + run.width);
  }
  const first = runs[0];
  return { runs, y: first?.y ?? 0, size, x: first?.x ?? 0, right, text: joinRuns(runs) };
}

/** Lines of `runs`, top to bottom; each line's runs left to right. Empty lines are dropped. */
export function groupLines(runs: readonly TextRun[]): TextLine[] {
  const sorted = [...runs].sort((a, b) => a.y - b.y || a.x - b.x);
  const lines: TextLine[] = [];
  let current: TextRun[] = [];
  let baseline = 0;
  let size = 0;
  for (const run of sorted) {
    // Superscripts and subscripts sit up to about 0.4 em off the baseline; the next line is ≥ 1 em away.
    if (current.length > 0 && run.y - baseline <= 0.5 * Math.min(size, run.size)) {
      current.push(run);
      if (run.size > size) {
        size = run.size;
        baseline = run.y;
      }
      continue;
    }
    if (current.length > 0) lines.push(finishLine(current));
    current = [run];
    baseline = run.y;
    size = run.size;
  }
  if (current.length > 0) lines.push(finishLine(current));
  return lines.filter((line) => line.text.length > 0);
}

/** Number of non-space characters of a run (the weight of a run in layout statistics). */
export function inkChars(run: TextRun): number {
  let count = 0;
  for (const char of run.text) if (char.trim().length > 0) count++;
  return count;
}

/**
 * The tallest horizontal band of the page (as a share of its height) with no text in it, margins
 * included. An image covering most of a page needs such a band unless it lies under the text.
 */
export function largestTextFreeBand(runs: readonly TextRun[], pageHeight: number): number {
  if (pageHeight <= 0) return 0;
  if (runs.length === 0) return 1;
  // Each run occupies its ascent above the baseline and a little descent below it.
  const boxes = runs.map((run) => [run.y - run.size, run.y + 0.25 * run.size] as const).sort((a, b) => a[0] - b[0]);
  let largest = 0;
  let reached = 0;
  for (const [top, bottom] of boxes) {
    if (top > reached) largest = Math.max(largest, top - reached);
    reached = Math.max(reached, bottom);
  }
  largest = Math.max(largest, pageHeight - reached);
  return Math.min(1, largest / pageHeight);
}
