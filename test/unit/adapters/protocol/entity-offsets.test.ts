import { describe, expect, it } from 'vitest';
import { codePointIndexer, toCodePointOffsets } from '../../../../adapters/protocol/entity-offsets.js';

/** UTF-16 → code-point offsets, checked against `Array.from` (which iterates code points). */

const reference = (text: string, utf16: number): number => Array.from(text.slice(0, utf16)).length;

describe('codePointIndexer', () => {
  it('is the identity on BMP-only text', () => {
    const text = 'Élysée Palace, 東京 — ok';
    const index = codePointIndexer(text);
    for (let i = 0; i <= text.length; i++) expect(index(i)).toBe(i);
  });

  it('counts each astral character once', () => {
    const text = '🎉 Angela 👩‍💻 met 𝔘𝔫𝔦 in Paris 😀';
    const index = codePointIndexer(text);
    const boundaries = [...text.matchAll(/\S+/g)].flatMap((m) => [m.index, m.index + m[0].length]);
    for (const b of boundaries) expect(index(b), `offset ${b}`).toBe(reference(text, b));
    expect(index(text.length)).toBe(Array.from(text).length);
  });

  it('maps spans so that Python-style slicing gives the same text', () => {
    const text = '😀😀 Paris and 🎉Berlin';
    const spans = [
      { text: 'Paris', start: text.indexOf('Paris'), end: text.indexOf('Paris') + 5 },
      { text: 'Berlin', start: text.indexOf('Berlin'), end: text.indexOf('Berlin') + 6 },
    ];
    const points = Array.from(text);
    for (const span of toCodePointOffsets(text, spans)) expect(points.slice(span.start, span.end).join('')).toBe(span.text);
    expect(toCodePointOffsets(text, spans).map((s) => s.start)).toEqual([3, 14]);
  });
});
