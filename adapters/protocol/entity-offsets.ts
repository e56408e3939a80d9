import { z } from 'zod';

/**
 * Which index entity `start`/`end` count in. `utf16` (the default): UTF-16 code units, as
 * JavaScript strings index (`text.slice(start, end)`). `codepoint`: Unicode code points, as Python
 * strings index (`text[start:end]`). The two differ only after a character outside the Basic
 * Multilingual Plane (an emoji, many CJK extension characters), which takes two UTF-16 units.
 */

export const EntityOffsets = z.enum(['utf16', 'codepoint']);
export type EntityOffsets = z.infer<typeof EntityOffsets>;

const HIGH_SURROGATE = /[\uD800-\uDBFF]/;

/**
 * A function mapping a UTF-16 offset of `text` to its code-point offset. An offset that falls
 * between the two halves of a surrogate pair maps to the character's index (entity spans never
 * split one; this only keeps the mapping total).
 */
export function codePointIndexer(text: string): (utf16: number) => number {
  if (!HIGH_SURROGATE.test(text)) return (utf16) => utf16;
  const map = new Int32Array(text.length + 1);
  let points = 0;
  for (let i = 0; i < text.length; i++) {
    map[i] = points;
    const unit = text.charCodeAt(i);
    const next = text.charCodeAt(i + 1);
    if (unit >= 0xd800 && unit <= 0xdbff && next >= 0xdc00 && next <= 0xdfff) {
      map[i + 1] = points;
      i++;
    }
    points++;
  }
  map[text.length] = points;
  return (utf16) => map[Math.max(0, Math.min(utf16, text.length))] ?? points;
}

/** The spans in code points (new objects; `text` of each span is unchanged). */
export function toCodePointOffsets<T extends { start: number; end: number }>(text: string, spans: readonly T[]): T[] {
  const index = codePointIndexer(text);
  return spans.map((span) => ({ ...span, start: index(span.start), end: index(span.end) }));
}
