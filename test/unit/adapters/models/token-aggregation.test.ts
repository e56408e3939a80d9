import { describe, expect, it } from 'vitest';
import { aggregateEntities, isSubword, type TokenPrediction } from '../../../../adapters/models/token-classification/token-aggregation.js';

/** Synthetic token predictions over "w0 w1 w2 ..." where token i covers word i (or a piece of it). */
function tokens(text: string, pieces: [token: string, label: string, score: number, subword?: boolean][]): TokenPrediction[] {
  let cursor = 0;
  return pieces.map(([token, label, score, subword]) => {
    const surface = token.replace(/^##/, '');
    const start = text.indexOf(surface, cursor);
    cursor = start + surface.length;
    return { token, span: [start, cursor], label, score, subword: subword ?? token.startsWith('##') };
  });
}

describe('aggregateEntities (Hugging Face TokenClassificationPipeline semantics)', () => {
  const text = 'ada lovelace met charles babbage in london';
  const predicted = tokens(text, [
    ['ada', 'B-PER', 0.9],
    ['love', 'I-PER', 0.8],
    ['##lace', 'O', 0.5],
    ['met', 'O', 0.9],
    ['charles', 'B-PER', 0.6],
    ['babbage', 'B-PER', 0.4],
    ['in', 'I-LOC', 0.3],
    ['london', 'LOC', 0.5],
  ]);

  it("'simple' groups while the tag holds and no B- starts, averages scores, drops O groups", () => {
    const entities = aggregateEntities(text, predicted, { strategy: 'simple', outside: 'O' });
    expect(entities.map((e) => [e.label, e.text])).toEqual([
      ['PER', 'ada love'],
      ['PER', 'charles'],
      ['PER', 'babbage'],
      // A label without B-/I- counts as I- of itself, so it joins the I-LOC before it.
      ['LOC', 'in london'],
    ]);
    expect(entities[0]?.score).toBeCloseTo(0.85, 12);
    expect(entities[3]?.score).toBeCloseTo(0.4, 12);
  });

  it("'first' labels a whole word by its first token", () => {
    const entities = aggregateEntities(text, predicted, { strategy: 'first', outside: 'O' });
    expect(entities.map((e) => [e.label, e.text, e.start, e.end])).toEqual([
      ['PER', 'ada lovelace', 0, 12],
      ['PER', 'charles', 17, 24],
      ['PER', 'babbage', 25, 32],
      ['LOC', 'in london', 33, 42],
    ]);
    expect(entities[0]?.score).toBeCloseTo(0.85, 12);
  });

  it("'none' keeps every non-O token with its full label; threshold drops lower scores", () => {
    const entities = aggregateEntities(text, predicted, { strategy: 'none', outside: 'O', threshold: 0.5 });
    expect(entities.map((e) => [e.label, e.text, e.score])).toEqual([
      ['B-PER', 'ada', 0.9],
      ['I-PER', 'love', 0.8],
      ['B-PER', 'charles', 0.6],
      ['LOC', 'london', 0.5],
    ]);
  });
});

describe('isSubword', () => {
  it("'length': a continuation differs in length from its characters; [UNK] never is one", () => {
    const text = 'Merkel naïve 🙂';
    expect(isSubword('length', '##kel', text, [3, 6], false)).toBe(true);
    expect(isSubword('length', 'mer', text, [0, 3], false)).toBe(false);
    // Accents removed by normalization keep the length; lengths count code points, not UTF-16 units.
    expect(isSubword('length', 'naive', text, [7, 12], false)).toBe(false);
    expect(isSubword('length', '[UNK]', text, [13, 15], true)).toBe(false);
  });

  it("'space': a token is a sub-word unless a space precedes or starts it", () => {
    const text = 'New York-based';
    expect(isSubword('space', 'New', text, [0, 3], false)).toBe(false);
    expect(isSubword('space', 'York', text, [4, 8], false)).toBe(false);
    expect(isSubword('space', '-', text, [8, 9], false)).toBe(true);
    expect(isSubword('space', 'based', text, [9, 14], false)).toBe(true);
  });
});
