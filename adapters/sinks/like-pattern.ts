/**
 * SQL LIKE for the in-process backends (file://, S3): `%` any run of characters, `_` exactly one,
 * a backslash makes the next character literal (`\_`, `\%`, `\\`; a trailing one is literal), as
 * PostgreSQL and LanceDB read it, so every backend matches the same rows. Characters are code
 * points, as in both databases: `_` matches one emoji, not half of its surrogate pair.
 *
 * Matched without backtracking: a regular expression built from the pattern (`^.*a.*a.*a.*b$`)
 * backtracked for 96 s on a 500-character value and blocked the event loop. Here the pattern is
 * split at its `%`s into segments of literal characters and `_`; the first segment must match at
 * the start, the last at the end, and each middle one at its earliest place after the previous
 * one. Earliest is always right: a segment's length in characters is fixed, so the earliest start
 * leaves the most room for the rest. Work is O(value × pattern) in the worst case (a segment of
 * `_` and literals tried at every place), O(value) for the usual `%word%`.
 */

/** A piece of a segment: one `_`, or a run of literal text (code units, compared as such). */
type Piece = { kind: 'one' } | { kind: 'text'; text: string };

interface Segment {
  pieces: readonly Piece[];
  /** The whole segment when it has no `_`: found with indexOf (one pass, no per-place loop). */
  literal: string | null;
}

export interface LikeMatcher {
  (value: string): boolean;
}

function isHigh(unit: number): boolean {
  return unit >= 0xd800 && unit <= 0xdbff;
}

function isLow(unit: number): boolean {
  return unit >= 0xdc00 && unit <= 0xdfff;
}

/** Code units of the character starting at `at` (2 for a surrogate pair, else 1). */
function widthAt(value: string, at: number): number {
  return isHigh(value.charCodeAt(at)) && isLow(value.charCodeAt(at + 1)) ? 2 : 1;
}

/** Code units of the character ending just before `end`. */
function widthBefore(value: string, end: number): number {
  return isLow(value.charCodeAt(end - 1)) && end >= 2 && isHigh(value.charCodeAt(end - 2)) ? 2 : 1;
}

/** Whether `at` falls between two characters (not inside a surrogate pair). */
function onBoundary(value: string, at: number): boolean {
  return at === 0 || at >= value.length || !(isLow(value.charCodeAt(at)) && isHigh(value.charCodeAt(at - 1)));
}

function toSegments(pattern: string): Segment[] {
  const segments: Piece[][] = [[]];
  let text = '';
  const flush = (): void => {
    if (text !== '') segments[segments.length - 1]?.push({ kind: 'text', text });
    text = '';
  };
  const chars = [...pattern];
  for (let at = 0; at < chars.length; at++) {
    const ch = chars[at] ?? '';
    if (ch === '\\' && at + 1 < chars.length) text += chars[++at] ?? '';
    else if (ch === '%') {
      flush();
      segments.push([]);
    } else if (ch === '_') {
      flush();
      segments[segments.length - 1]?.push({ kind: 'one' });
    } else text += ch;
  }
  flush();
  return segments.map((pieces) => ({
    pieces,
    literal: pieces.every((piece) => piece.kind === 'text') ? pieces.map((piece) => (piece.kind === 'text' ? piece.text : '')).join('') : null,
  }));
}

/** Where the segment ends when it matches at `at`, or -1. */
function matchForward(value: string, at: number, pieces: readonly Piece[]): number {
  let position = at;
  for (const piece of pieces) {
    if (piece.kind === 'one') {
      if (position >= value.length) return -1;
      position += widthAt(value, position);
    } else {
      if (!value.startsWith(piece.text, position)) return -1;
      position += piece.text.length;
      // A pattern's lone surrogate must not match half of a value's pair.
      if (!onBoundary(value, position)) return -1;
    }
  }
  return position;
}

/** Where the segment starts when it matches ending exactly at `end`, or -1. */
function matchBackward(value: string, end: number, pieces: readonly Piece[]): number {
  let position = end;
  for (let index = pieces.length - 1; index >= 0; index--) {
    const piece = pieces[index];
    if (piece === undefined) continue;
    if (piece.kind === 'one') {
      if (position <= 0) return -1;
      position -= widthBefore(value, position);
    } else {
      const start = position - piece.text.length;
      if (start < 0 || !value.startsWith(piece.text, start) || !onBoundary(value, start)) return -1;
      position = start;
    }
  }
  return position;
}

/** The end of the earliest match of `segment` starting at or after `from`, or -1. */
function findEarliest(value: string, from: number, segment: Segment): number {
  if (segment.literal !== null) {
    for (let at = value.indexOf(segment.literal, from); at !== -1; at = value.indexOf(segment.literal, at + 1)) {
      if (onBoundary(value, at) && onBoundary(value, at + segment.literal.length)) return at + segment.literal.length;
    }
    return -1;
  }
  for (let at = from; at <= value.length; at += at < value.length ? widthAt(value, at) : 1) {
    const end = matchForward(value, at, segment.pieces);
    if (end !== -1) return end;
  }
  return -1;
}

/** A matcher for one LIKE pattern, built once and run on every row. */
export function likeMatcher(pattern: string): LikeMatcher {
  const segments = toSegments(pattern);
  const first = segments[0] ?? { pieces: [], literal: '' };
  if (segments.length === 1) return (value) => matchForward(value, 0, first.pieces) === value.length;
  const last = segments[segments.length - 1] ?? { pieces: [], literal: '' };
  const middle = segments.slice(1, -1).filter((segment) => segment.pieces.length > 0);
  return (value) => {
    let position = matchForward(value, 0, first.pieces);
    if (position === -1) return false;
    const lastStart = matchBackward(value, value.length, last.pieces);
    if (lastStart === -1 || lastStart < position) return false;
    for (const segment of middle) {
      position = findEarliest(value, position, segment);
      if (position === -1 || position > lastStart) return false;
    }
    return true;
  };
}
