import { orderColumns } from './columns.js';
import { groupLines, inkChars, type TextLine, type TextRun } from './text-lines.js';
import type { Heading } from './text-reader.js';

/**
 * A PDF page's text in reading order from its text runs: column blocks (columns.ts), lines top to
 * bottom, a blank line between paragraphs (a vertical gap clearly larger than the block's line
 * pitch) and around headings, words hyphenated across a line end joined again. Headings are the
 * lines set notably larger than the page's body text.
 */

export interface PageText {
  text: string;
  headings: Heading[];
}

/** A line whose font is this much larger than the body size is a heading. */
const HEADING_RATIO = 1.15;
const MAX_HEADING_CHARS = 200;
/** A gap this many times the usual line pitch starts a new paragraph. */
const PARAGRAPH_GAP = 1.5;

/** The font size carrying the most characters on the page (rounded to half points). */
function bodySize(runs: readonly TextRun[]): number {
  const weight = new Map<number, number>();
  for (const run of runs) {
    const size = Math.round(run.size * 2) / 2;
    weight.set(size, (weight.get(size) ?? 0) + inkChars(run));
  }
  let best = 0;
  let bestWeight = -1;
  for (const [size, chars] of weight) {
    if (chars > bestWeight) {
      best = size;
      bestWeight = chars;
    }
  }
  return best;
}

/** The size most of a line's characters are set in (a line with one large initial is not a heading). */
function dominantSize(line: TextLine): number {
  const weight = new Map<number, number>();
  for (const run of line.runs) weight.set(run.size, (weight.get(run.size) ?? 0) + inkChars(run));
  let best = line.size;
  let bestWeight = -1;
  for (const [size, chars] of weight) {
    if (chars > bestWeight) {
      best = size;
      bestWeight = chars;
    }
  }
  return best;
}

function linePitch(lines: readonly TextLine[]): number {
  const gaps: number[] = [];
  for (let i = 1; i < lines.length; i++) {
    const gap = (lines[i]?.y ?? 0) - (lines[i - 1]?.y ?? 0);
    if (gap > 0) gaps.push(gap);
  }
  if (gaps.length === 0) return Infinity;
  gaps.sort((a, b) => a - b);
  return gaps[Math.floor(gaps.length / 2)] ?? Infinity;
}

/**
 * Paragraphs set without space between them start with an indented first line, after a
 * previous paragraph whose last line stopped short of the column's right edge.
 */
function indentedAfterShort(line: TextLine, previous: TextLine, left: number, right: number): boolean {
  const indent = line.x - left;
  const indented = indent >= 0.8 * line.size && indent <= 6 * line.size && Math.abs(previous.x - left) < 0.5 * line.size;
  return indented && previous.right < right - 0.1 * (right - left);
}

interface Piece {
  text: string;
  heading: boolean;
  /** Blank line before this piece. */
  paragraph: boolean;
  /** First line of a column block. */
  blockStart: boolean;
}

function pieces(runs: readonly TextRun[]): Piece[] {
  const body = bodySize(runs);
  const out: Piece[] = [];
  for (const block of orderColumns(runs)) {
    const lines = groupLines(block);
    const pitch = linePitch(lines);
    const left = Math.min(...lines.map((line) => line.x));
    const right = Math.max(...lines.map((line) => line.right));
    lines.forEach((line, index) => {
      const heading = dominantSize(line) >= HEADING_RATIO * body && line.text.length <= MAX_HEADING_CHARS && /\p{L}/u.test(line.text);
      const previous = lines[index - 1];
      const gap = previous === undefined ? 0 : line.y - previous.y;
      const spaced = gap > PARAGRAPH_GAP * pitch || gap > PARAGRAPH_GAP * 1.2 * Math.max(line.size, previous?.size ?? 0);
      out.push({ text: line.text, heading, blockStart: index === 0, paragraph: index === 0 || spaced || (previous !== undefined && indentedAfterShort(line, previous, left, right)) });
    });
  }
  return out;
}

const HYPHENATED = /\p{Ll}-$/u;
const CONTINUES = /^\p{Ll}/u;
const SENTENCE_END = /[.!?:;]["'’”)]?$/u;

export function pageText(runs: readonly TextRun[]): PageText {
  const headings: Heading[] = [];
  let text = '';
  let previous: Piece | null = null;
  let openHeading: Heading | null = null;
  for (const piece of pieces(runs)) {
    const mergeHeading = openHeading !== null && piece.heading && previous?.heading === true && !piece.paragraph;
    // A paragraph running on from the foot of one column to the head of the next is not broken.
    const runsOn = piece.blockStart && !piece.heading && previous?.heading === false && CONTINUES.test(piece.text) && !SENTENCE_END.test(text);
    const breakBefore = previous === null ? '' : (piece.paragraph && !runsOn) || piece.heading !== previous.heading ? '\n\n' : '\n';
    if (previous !== null && breakBefore === '\n' && HYPHENATED.test(text) && CONTINUES.test(piece.text)) {
      text = text.slice(0, -1) + piece.text;
    } else {
      text += breakBefore;
      if (piece.heading && !mergeHeading) openHeading = { offset: text.length, text: piece.text };
      text += piece.text;
    }
    if (piece.heading && openHeading !== null) {
      if (mergeHeading) openHeading.text = `${openHeading.text} ${piece.text}`;
      if (!mergeHeading) headings.push(openHeading);
    } else {
      openHeading = null;
    }
    previous = piece;
  }
  // Lines of a heading are merged into one; a merged block longer than a heading can be is body
  // text set larger than the page's most common size (the Federal Register's first page gave
  // "headings" of 600-1,362 characters), so it heads nothing.
  return { text, headings: headings.filter((heading) => heading.text.length <= MAX_HEADING_CHARS) };
}
