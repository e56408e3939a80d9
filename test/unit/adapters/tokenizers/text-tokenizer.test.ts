import { beforeAll, describe, expect, it } from 'vitest';
import { TextTokenizer } from '../../../../adapters/tokenizers/text-tokenizer.js';
import { fixtureDir, loadTinyModel } from '../../../helpers/tiny-model.js';

/**
 * TextTokenizer on the fixture tokenizers: truncation that keeps the template's special tokens
 * (single texts, longest-first pairs, left truncation side), the reported length, and the fast
 * path for very long texts, which must give exactly the ids full tokenization gives.
 */

const bert = loadTinyModel('tiny-bert-cls-prompts');
const SENTENCE = 'the big red dog runs to the old house by the river';
const WORDS = SENTENCE.split(' ');
const QUERY = 'where do cats live';

let tokenizer: TextTokenizer;
let leftTokenizer: TextTokenizer;
let decoder: TextTokenizer;
beforeAll(async () => {
  tokenizer = await TextTokenizer.load(fixtureDir('tiny-bert-cls-prompts'));
  leftTokenizer = await TextTokenizer.load(fixtureDir('tiny-bert-cls-prompts'), { truncation_side: 'left' });
  decoder = await TextTokenizer.load(fixtureDir('tiny-decoder-last'));
});

const wrap = (...tokens: string[]): number[] => bert.ids(['[CLS]', ...tokens, '[SEP]']);
const pairIds = (a: readonly string[], b: readonly string[]): number[] => bert.ids(['[CLS]', ...a, '[SEP]', ...b, '[SEP]']);

describe('TextTokenizer.encode', () => {
  it('keeps a text that fits, untruncated, with its full length', () => {
    expect(tokenizer.encode(SENTENCE, { maxLength: 14 })).toMatchObject({ ids: wrap(...WORDS), truncated: false, length: 14 });
  });

  it('cuts a single text to max_length, keeping [CLS] and [SEP]', () => {
    const encoded = tokenizer.encode(SENTENCE, { maxLength: 6 });
    expect(encoded).toMatchObject({ ids: wrap(...WORDS.slice(0, 4)), truncated: true, length: 14 });
    expect(encoded.specialMask).toEqual([1, 0, 0, 0, 0, 1]);
  });

  it('cuts from the start when truncation_side is left', () => {
    expect(leftTokenizer.info.truncationSide).toBe('left');
    expect(leftTokenizer.encode(SENTENCE, { maxLength: 6 }).ids).toEqual(wrap(...WORDS.slice(-4)));
  });

  it('truncates pairs longest-first, keeping both separators', () => {
    const query = QUERY.split(' ');
    // Budget 13: the 4-token query stays whole, the 12-token passage keeps 9.
    const short = tokenizer.encode(QUERY, { maxLength: 16, pair: SENTENCE });
    expect(short).toMatchObject({ ids: pairIds(query, WORDS.slice(0, 9)), truncated: true, length: 19 });
    expect(short.typeIds).toEqual([...new Array<number>(6).fill(0), ...new Array<number>(10).fill(1)]);
    // Both 12 tokens (a tie), budget 13: the first gets 6, the second 7.
    expect(tokenizer.encode(SENTENCE, { maxLength: 16, pair: SENTENCE }).ids).toEqual(pairIds(WORDS.slice(0, 6), WORDS.slice(0, 7)));
    // Left side: each segment loses its first tokens instead.
    expect(leftTokenizer.encode(SENTENCE, { maxLength: 16, pair: SENTENCE }).ids).toEqual(pairIds(WORDS.slice(-6), WORDS.slice(-7)));
  });

  it('without special tokens, max_length counts text tokens only', () => {
    expect(tokenizer.encode(SENTENCE, { maxLength: 3, addSpecialTokens: false })).toMatchObject({
      ids: bert.ids(WORDS.slice(0, 3)),
      typeIds: [0, 0, 0],
      specialMask: [0, 0, 0],
      truncated: true,
    });
  });

  it('gives [CLS] [SEP] for the empty text and keeps them at the smallest max_length', () => {
    expect(tokenizer.encode('', { maxLength: 8 }).ids).toEqual(wrap());
    expect(tokenizer.encode(SENTENCE, { maxLength: 2 })).toMatchObject({ ids: wrap(), truncated: true });
  });
});

describe('long-text fast path', () => {
  // Different whitespace between words (double spaces, newlines, tabs) so the prefix cut lands
  // in various places; about 30k characters, far beyond the 4096-character minimum window.
  const pieces = ['the cat sat on the mat.', 'a big  red dog\nruns in the park', 'cats live in houses,\tmostly', 'where do   cats live?'];
  const longText = Array.from({ length: 1000 }, (_, i) => pieces[i % pieces.length]).join(' ');

  for (const maxLength of [2, 3, 24, 300, 341, 512, 1500]) {
    it(`WordPiece: max_length ${maxLength} gives the ids of full tokenization`, () => {
      const fast = tokenizer.encode(longText, { maxLength });
      const full = tokenizer.encode(longText, { maxLength, exactLength: true });
      expect(fast.ids).toEqual(full.ids);
      expect(fast.truncated).toBe(true);
      expect(full.truncated).toBe(true);
      expect(fast.length).toBeLessThanOrEqual(full.length);
      expect(fast.length).toBeGreaterThan(maxLength);
    });
  }

  for (const maxLength of [24, 333, 1024]) {
    it(`byte-level BPE: max_length ${maxLength} gives the ids of full tokenization (whitespace runs at the cut)`, () => {
      const spaced = Array.from({ length: 500 }, (_, i) => `the cat${' '.repeat((i % 4) + 1)}sat${i % 3 === 0 ? '\n\n' : ' '}on the mat`).join('   ');
      const fast = decoder.encode(spaced, { maxLength });
      const full = decoder.encode(spaced, { maxLength, exactLength: true });
      expect(fast.ids).toEqual(full.ids);
      expect(fast.ids).toHaveLength(maxLength);
    });
  }

  it('a long run without whitespace falls back to full tokenization', () => {
    const run = `${'x'.repeat(6000)} the cat sat`;
    const fast = tokenizer.encode(run, { maxLength: 8 });
    expect(fast.ids).toEqual(wrap('[UNK]', 'the', 'cat', 'sat'));
    expect(fast.ids).toEqual(tokenizer.encode(run, { maxLength: 8, exactLength: true }).ids);
  });

  it('exactLength counts every token of the text', () => {
    const full = tokenizer.encode(longText, { maxLength: 24, exactLength: true });
    const everything = tokenizer.segmentIds(longText).length;
    expect(full.length).toBe(everything + 2);
  });
});
