import type { Heading } from './text-reader.js';

/**
 * Page furniture: the page numbers, running heads and feet and margin stamps printed on the pages
 * of a PDF around its text ("47700 Federal Register" on top, "E:\FR\FM\06AUP1.SGM" and a
 * typesetter's stamp at the foot of every page of the Federal Register; a bare "3" under page 3).
 * Left in, they are glued to the first and last chunk of every page, and a page's running head
 * becomes the heading its chunks fall under. Docling leaves them out of the text the same way.
 *
 * Lines at a page's top or bottom edge are read first (the first and last EDGE_LINES lines with
 * text), taken from the edge inwards and stopping at the first line that is not furniture. An edge
 * line is furniture when
 * - it is the page's own number at the very edge: "3", "iii", "Page 3", "3 of 12", "- 3 -"; or
 * - the same line stands among the edge lines of the same edge (top or foot) on at least a fifth
 *   of the document's pages, and on three at the least: a running head, foot or stamp. Among the
 *   edge lines, not at one place: a head set in pieces moves by a line from page to page (the
 *   Federal Register's "/ Vol. 85, No. 152 / …" is the second line under "47702 Federal Register"
 *   and the third under "Federal Register" and "47703"); body text that repeats (a filler
 *   paragraph set on every page) is still safe, since the sweep from the edge stops at the first
 *   line that is not furniture. A number in the line that moves with the page (the page number
 *   plus a constant, as in "47700 Federal Register" on page 3 and "47702 Federal Register" on page
 *   5, or "Frm 00008" on page 8) counts as the same; any other number must be equal. A fifth, not
 *   a half: odd and even pages carry different heads, and one document sets its head in several
 *   ways.
 * Then a line anywhere else on a page that was swept away as furniture at the edges of enough
 * pages (the same text, or the same with its page-following number) goes too: pdf.js's reading
 * order puts some pages' heads and stamps inside their text. A line never removed at the edges
 * of enough pages always stays.
 * Long lines (over MAX_FURNITURE_CHARS) are never furniture: a repeated sentence is content.
 */

export interface FurniturePage {
  page: number;
  text: string;
  headings?: Heading[] | undefined;
}

/**
 * The version of these rules, part of an index's settings hash: a change that removes other lines
 * makes other rows, so documents ingested before it are read again. 2: a head's pieces anywhere
 * among the edge lines, every number of a line tried as the page's, furniture inside the text.
 */
export const FURNITURE_RULES = 2;

const EDGE_LINES = 4;
const MAX_FURNITURE_CHARS = 120;
const MIN_REPEATS = 3;
const REPEAT_SHARE = 0.2;

const ROMAN = /^[ivxlcdm]+$/i;
const PAGE_LABEL = /^(?:page\s+)?(\d{1,6}|[ivxlcdm]{1,10})(?:\s*(?:of|\/)\s*\d{1,6})?$/i;
const DASHED_NUMBER = /^[-–—]\s*(\d{1,6})\s*[-–—]$/;

/** Digit runs of a line tried as its page number (a typesetter's stamp has a dozen). */
const NUMBERS_TRIED = 16;

/**
 * The keys a line is compared across pages by: the line itself (trimmed, lower case, single
 * spaces), and the line with one of its numbers replaced by that number's distance from the page
 * number, so a running page number matches on every page and any other number does not.
 */
function repeatKeys(line: string, page: number): string[] {
  const plain = line.trim().toLowerCase().replace(/\s+/g, ' ');
  const keys = [plain];
  if (ROMAN.test(plain)) {
    const value = romanValue(plain);
    if (value !== null) keys.push(`#r${value - page}`);
    return keys;
  }
  for (const run of [...plain.matchAll(/\d{1,7}/g)].slice(0, NUMBERS_TRIED)) {
    const at = run.index;
    keys.push(`${plain.slice(0, at)}#${Number(run[0]) - page}#${plain.slice(at + run[0].length)}`);
  }
  return keys;
}

/**
 * What two lines that share a repeat key have in common: the same text with every digit run as
 * `#` (a key replaces one run by its distance from the page number). A roman numeral line's key
 * is its value, so every such line has one shape.
 */
function shapeOf(line: string): string {
  const plain = line.trim().toLowerCase().replace(/\s+/g, ' ');
  return ROMAN.test(plain) ? '#roman' : plain.replace(/\d+/g, '#');
}

const ROMAN_VALUES: Record<string, number> = { i: 1, v: 5, x: 10, l: 50, c: 100, d: 500, m: 1000 };

/** The value of a lower-case roman numeral written the usual way, or null ("iiii", "vx" are not). */
function romanValue(text: string): number | null {
  let total = 0;
  for (let index = 0; index < text.length; index++) {
    const value = ROMAN_VALUES[text[index] ?? ''] ?? 0;
    const next = ROMAN_VALUES[text[index + 1] ?? ''] ?? 0;
    total += value < next ? -value : value;
  }
  return total > 0 && romanNumeral(total) === text ? total : null;
}

function romanNumeral(value: number): string {
  const parts: [number, string][] = [[1000, 'm'], [900, 'cm'], [500, 'd'], [400, 'cd'], [100, 'c'], [90, 'xc'], [50, 'l'], [40, 'xl'], [10, 'x'], [9, 'ix'], [5, 'v'], [4, 'iv'], [1, 'i']];
  let rest = value;
  let out = '';
  for (const [amount, letters] of parts) {
    while (rest >= amount) {
      out += letters;
      rest -= amount;
    }
  }
  return out;
}

/** Whether `line` is page `page`'s own number ("3", "iii", "Page 3", "3 of 12", "- 3 -"). */
export function isOwnPageNumber(line: string, page: number): boolean {
  const trimmed = line.trim();
  const label = PAGE_LABEL.exec(trimmed)?.[1] ?? DASHED_NUMBER.exec(trimmed)?.[1];
  if (label === undefined) return false;
  return label.toLowerCase() === String(page) || label.toLowerCase() === romanNumeral(page);
}

interface Line {
  text: string;
  /** Offset of the line's first character in the page text. */
  start: number;
}

function linesOf(text: string): Line[] {
  const lines: Line[] = [];
  let start = 0;
  for (const part of text.split('\n')) {
    lines.push({ text: part, start });
    start += part.length + 1;
  }
  return lines;
}

/**
 * Indexes of the lines with text nearest the top and the bottom edge, each in order from its edge
 * inwards: at most EDGE_LINES each, and on a short page its upper half and its lower half.
 */
function edgeLines(lines: readonly Line[]): { top: number[]; bottom: number[] } {
  const filled = lines.flatMap((line, index) => (line.text.trim() === '' ? [] : [index]));
  const topCount = Math.min(EDGE_LINES, Math.ceil(filled.length / 2));
  const bottomCount = Math.min(EDGE_LINES, filled.length - topCount);
  return { top: filled.slice(0, topCount), bottom: filled.slice(filled.length - bottomCount).reverse() };
}

function candidate(line: string): boolean {
  const trimmed = line.trim();
  return trimmed.length > 0 && trimmed.length <= MAX_FURNITURE_CHARS;
}

/**
 * The pages without their furniture; heading offsets follow the text, and a heading that was
 * furniture goes with it. Pages are returned as new objects; a page with none is returned as is.
 */
export function dropPageFurniture<P extends FurniturePage>(pages: readonly P[]): P[] {
  // Each line's repeat keys, computed once per page and line as they are first needed; a line too
  // long to be furniture has none.
  const split = pages.map((page) => {
    const lines = linesOf(page.text);
    const keys = new Map<number, string[]>();
    const keysOf = (index: number): string[] => {
      let found = keys.get(index);
      if (found === undefined) {
        const text = lines[index]?.text ?? '';
        found = candidate(text) ? repeatKeys(text, page.page) : [];
        keys.set(index, found);
      }
      return found;
    };
    return { page, lines, edges: edgeLines(lines), keysOf };
  });
  // On how many pages each key stands among the edge lines of each edge (t = top, b = foot),
  // counted once per page.
  const seenOn = new Map<string, number>();
  for (const { edges, keysOf } of split) {
    const placed = new Set([...edges.top.flatMap((index) => keysOf(index).map((key) => `t|${key}`)), ...edges.bottom.flatMap((index) => keysOf(index).map((key) => `b|${key}`))]);
    for (const key of placed) seenOn.set(key, (seenOn.get(key) ?? 0) + 1);
  }
  const needed = Math.max(MIN_REPEATS, Math.ceil(pages.length * REPEAT_SHARE));

  // First the sweeps from each edge inwards.
  const swept = split.map(({ page, lines, edges, keysOf }) => {
    const removed = new Set<number>();
    const sweep = (edge: 't' | 'b', order: readonly number[]): void => {
      for (const [position, index] of order.entries()) {
        const keys = keysOf(index);
        const repeated = keys.some((key) => (seenOn.get(`${edge}|${key}`) ?? 0) >= needed);
        const furniture = keys.length > 0 && (repeated || (position === 0 && isOwnPageNumber(lines[index]?.text ?? '', page.page)));
        if (!furniture) return;
        removed.add(index);
      }
    };
    sweep('t', edges.top);
    sweep('b', edges.bottom);
    return removed;
  });
  // On how many pages each line (by its repeat keys, either edge) was swept away as furniture,
  // and the shapes of those lines: only a line of the same shape can share a key with one.
  const sweptOn = new Map<string, number>();
  const sweptShapes = new Set<string>();
  split.forEach(({ lines, keysOf }, at) => {
    const indexes = [...(swept[at] ?? [])];
    for (const index of indexes) sweptShapes.add(shapeOf(lines[index]?.text ?? ''));
    for (const key of new Set(indexes.flatMap((index) => keysOf(index)))) sweptOn.set(key, (sweptOn.get(key) ?? 0) + 1);
  });

  return split.map(({ page, lines, keysOf }, at) => {
    const removed = swept[at] ?? new Set<number>();
    // The same furniture elsewhere on a page: reading order sets some pages' heads and stamps in
    // the middle of their text (the Federal Register's figure pages). Only lines swept away at the
    // edges of enough pages qualify, so a line that stands only inside pages is never removed.
    lines.forEach((line, index) => {
      // The shape first: repeat keys of every line of a long document cost about a millisecond a page.
      if (removed.has(index) || !sweptShapes.has(shapeOf(line.text))) return;
      if (keysOf(index).some((key) => (sweptOn.get(key) ?? 0) >= needed)) removed.add(index);
    });
    if (removed.size === 0) return page;
    return { ...page, ...rebuilt(lines, removed, page.headings) };
  });
}

/** The page text without the removed lines (and the blank lines they leave at either end), headings moved to match. */
function rebuilt(lines: readonly Line[], removed: ReadonlySet<number>, headings: readonly Heading[] | undefined): { text: string; headings?: Heading[] } {
  const kept = lines.map((_, index) => !removed.has(index));
  const firstText = kept.findIndex((keep, index) => keep && (lines[index]?.text.trim() ?? '') !== '');
  let lastText = -1;
  kept.forEach((keep, index) => {
    if (keep && (lines[index]?.text.trim() ?? '') !== '') lastText = index;
  });
  const newStart = new Map<number, number>();
  const parts: string[] = [];
  let length = 0;
  for (let index = 0; index < lines.length; index++) {
    if (!kept[index] || firstText === -1 || index < firstText || index > lastText) continue;
    if (parts.length > 0) length += 1;
    newStart.set(index, length);
    const text = lines[index]?.text ?? '';
    parts.push(text);
    length += text.length;
  }
  const text = parts.join('\n');
  if (headings === undefined) return { text };
  const moved: Heading[] = [];
  for (const heading of headings) {
    const index = lineAt(lines, heading.offset);
    const start = newStart.get(index);
    if (start === undefined) continue;
    moved.push({ ...heading, offset: start + heading.offset - (lines[index]?.start ?? 0) });
  }
  return { text, headings: moved };
}

/** The index of the line holding character `offset`. */
function lineAt(lines: readonly Line[], offset: number): number {
  let found = 0;
  for (let index = 0; index < lines.length; index++) {
    if ((lines[index]?.start ?? 0) <= offset) found = index;
    else break;
  }
  return found;
}
