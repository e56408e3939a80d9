import { beforeAll, describe, expect, it } from 'vitest';
import { locateTokens } from '../../../../adapters/tokenizers/offsets.js';
import { TextTokenizer } from '../../../../adapters/tokenizers/text-tokenizer.js';
import { fixtureDir } from '../../../helpers/tiny-model.js';

/**
 * Character offsets into the original text, as a fast tokenizer's offset mapping reports them:
 * accents removed by the uncased normalizer still map to their original characters (also when
 * written as a base letter plus a combining mark), an [UNK] covers its whole word, CJK characters
 * are words of their own, special tokens get [0, 0].
 */

let wordpiece: TextTokenizer;
let byteLevel: TextTokenizer;
beforeAll(async () => {
  wordpiece = await TextTokenizer.load(fixtureDir('tiny-ner'));
  byteLevel = await TextTokenizer.load(fixtureDir('tiny-decoder-last'));
});

/** Token → the original characters its offsets cover. */
function covered(text: string, tokenizer: TextTokenizer, maxLength = 64): [string, string][] {
  const encoded = tokenizer.encodeWithOffsets(text, maxLength);
  return encoded.tokens.map((token, i) => {
    const [start, end] = encoded.offsets[i] ?? [0, 0];
    return [token, text.slice(start, end)];
  });
}

describe('encodeWithOffsets (WordPiece)', () => {
  it('maps lower-cased, accent-stripped tokens back to the original characters', () => {
    expect(covered('Café naïve in ZÜRICH', wordpiece)).toEqual([
      ['[CLS]', ''],
      ['cafe', 'Café'],
      ['naive', 'naïve'],
      ['in', 'in'],
      ['zu', 'ZÜ'],
      ['##rich', 'RICH'],
      ['[SEP]', ''],
    ]);
  });

  it('keeps a combining accent with the letter it decorates', () => {
    const text = 'cafe\u0301 owners';
    const encoded = wordpiece.encodeWithOffsets(text, 64);
    expect(encoded.tokens.slice(1, 3)).toEqual(['cafe', '[UNK]']);
    expect(encoded.offsets.slice(1, 3)).toEqual([
      [0, 5],
      [6, 12],
    ]);
  });

  it('gives an [UNK] its whole word, an emoji its two UTF-16 units, CJK characters one each', () => {
    const text = 'xyzzy plays 🙂 日本!';
    const encoded = wordpiece.encodeWithOffsets(text, 64);
    expect(encoded.tokens).toEqual(['[CLS]', '[UNK]', 'play', '##s', '[UNK]', '日', '[UNK]', '!', '[SEP]']);
    expect(encoded.offsets).toEqual([
      [0, 0],
      [0, 5],
      [6, 10],
      [10, 11],
      [12, 14],
      [15, 16],
      [16, 17],
      [17, 18],
      [0, 0],
    ]);
  });

  it('splits punctuation off words and finds repeated words in order', () => {
    expect(covered('cats, dogs! the cat  the cat', wordpiece).slice(1, -1)).toEqual([
      ['cats', 'cats'],
      [',', ','],
      ['dogs', 'dogs'],
      ['!', '!'],
      ['the', 'the'],
      ['cat', 'cat'],
      ['the', 'the'],
      ['cat', 'cat'],
    ]);
    const encoded = wordpiece.encodeWithOffsets('the cat  the cat', 64);
    expect(encoded.offsets.slice(1, -1)).toEqual([
      [0, 3],
      [4, 7],
      [9, 12],
      [13, 16],
    ]);
  });

  it('truncates tokens and offsets together, keeping the special tokens', () => {
    const encoded = wordpiece.encodeWithOffsets('Alice Smith works for Acme', 4);
    expect(encoded.tokens).toEqual(['[CLS]', 'alice', 'smith', '[SEP]']);
    expect(encoded.offsets).toEqual([
      [0, 0],
      [0, 5],
      [6, 11],
      [0, 0],
    ]);
    expect(encoded).toMatchObject({ truncated: true, length: 7 });
  });
});

describe('encodeWithOffsets (byte-level BPE)', () => {
  it('trims the leading space of Ġ tokens and gives the appended <|endoftext|> [0, 0]', () => {
    const encoded = byteLevel.encodeWithOffsets('Where do cats live', 64);
    expect(encoded.tokens).toEqual(['Where', 'Ġdo', 'Ġcats', 'Ġlive', '<|endoftext|>']);
    expect(encoded.offsets).toEqual([
      [0, 5],
      [6, 8],
      [9, 13],
      [14, 18],
      [0, 0],
    ]);
  });
});

describe('locateTokens', () => {
  it('fills a token it cannot locate with the word between its located neighbours', () => {
    const rule = { kind: 'wordpiece', continuingPrefix: '##' } as const;
    expect(locateTokens('big xyzzy  dog', ['big', '[UNK]', 'dog'], rule, '[UNK]')).toEqual([
      [0, 3],
      [4, 9],
      [11, 14],
    ]);
  });
});
