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
 * leaves the most room for the rest. A middle segment without `_` is found with indexOf (O(value)
 * for the usual `%word%`); one with `_` by shift-and, O(value × ⌈segment / 32⌉). Work is thus
 * O(value × pattern / 32) at worst, never more than O(value × pattern).
 */

/** A piece of a segment: one `_`, or a run of literal text (code units, compared as such). */
type Piece = { kind: 'one' } | { kind: 'text'; text: string };

interface Segment {
  pieces: readonly Piece[];
  /** The whole segment when it has no `_`: found with indexOf (one pass, no per-place loop). */
  literal: string | null;
  /** For a segment with `_`: its bit-parallel search (shift-and), built once. */
  search: ShiftAnd | null;
}

/**
 * Shift-and (Baeza-Yates–Gonnet): every place a segment could start is followed at once, one bit
 * per character of the segment, in 32-bit words, so a segment with `_` is searched in
 * O(value × words) rather than O(value × segment length): a 256-character pattern is 8 words.
 */
interface ShiftAnd {
  /** Characters in the segment. */
  length: number;
  words: number;
  /** The bits of the segment's characters each code point matches (its own places and every `_`). */
  masks: ReadonlyMap<number, Uint32Array>;
  /** The bits a code point the segment does not name matches: the `_` places. */
  anyMask: Uint32Array;
}

function shiftAnd(pieces: readonly Piece[]): ShiftAnd {
  const chars: (number | null)[] = [];
  for (const piece of pieces) {
    if (piece.kind === 'one') chars.push(null);
    else for (const ch of piece.text) chars.push(ch.codePointAt(0) ?? 0);
  }
  const words = Math.max(1, Math.ceil(chars.length / 32));
  const anyMask = new Uint32Array(words);
  chars.forEach((ch, at) => {
    if (ch === null) anyMask[at >>> 5] = ((anyMask[at >>> 5] ?? 0) | (1 << (at & 31))) >>> 0;
  });
  const masks = new Map<number, Uint32Array>();
  chars.forEach((ch, at) => {
    if (ch === null) return;
    let mask = masks.get(ch);
    if (mask === undefined) {
      mask = Uint32Array.from(anyMask);
      masks.set(ch, mask);
    }
    mask[at >>> 5] = ((mask[at >>> 5] ?? 0) | (1 << (at & 31))) >>> 0;
  });
  return { length: chars.length, words, masks, anyMask };
}

/** The end of the earliest place at or after `from` where the segment matches, or -1. */
function shiftAndFind(value: string, from: number, search: ShiftAnd): number {
  const state = new Uint32Array(search.words);
  const lastWord = (search.length - 1) >>> 5;
  const lastBit = 1 << ((search.length - 1) & 31);
  for (let at = from; at < value.length; ) {
    const code = value.codePointAt(at) ?? 0;
    const width = widthAt(value, at);
    const mask = search.masks.get(code) ?? search.anyMask;
    // state = ((state << 1) | 1) & mask, across the words.
    for (let word = search.words - 1; word > 0; word--) {
      state[word] = ((((state[word] ?? 0) << 1) | ((state[word - 1] ?? 0) >>> 31)) & (mask[word] ?? 0)) >>> 0;
    }
    state[0] = ((((state[0] ?? 0) << 1) | 1) & (mask[0] ?? 0)) >>> 0;
    at += width;
    if (((state[lastWord] ?? 0) & lastBit) !== 0) return at;
  }
  return -1;
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
  return segments.map((pieces) => {
    const literal = pieces.every((piece) => piece.kind === 'text') ? pieces.map((piece) => (piece.kind === 'text' ? piece.text : '')).join('') : null;
    return { pieces, literal, search: literal === null ? shiftAnd(pieces) : null };
  });
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
  if (segment.search !== null) return shiftAndFind(value, from, segment.search);
  for (let at = from; at <= value.length; at += at < value.length ? widthAt(value, at) : 1) {
    const end = matchForward(value, at, segment.pieces);
    if (end !== -1) return end;
  }
  return -1;
}

/** A matcher for one LIKE pattern, built once and run on every row. */
export function likeMatcher(pattern: string): LikeMatcher {
  const segments = toSegments(pattern);
  const first = segments[0] ?? { pieces: [], literal: '', search: null };
  if (segments.length === 1) return (value) => matchForward(value, 0, first.pieces) === value.length;
  const last = segments[segments.length - 1] ?? { pieces: [], literal: '', search: null };
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
