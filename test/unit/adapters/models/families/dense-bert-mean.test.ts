import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InferenceEngine } from '../../../../../pipelines/inference/engine.js';
import { expectAllClose } from '../../../../helpers/conformance.js';
import { cosine, l2Normalize, loadTinyModel, maxAbsDiff, meanPool, tokenOutputs, type SequenceInput } from '../../../../helpers/tiny-model.js';

/**
 * Dense family, mean pooling (fixture tiny-bert-mean: BERT WordPiece, 1_Pooling mean with
 * include_prompt false, Normalize, max_seq_length 24 while tokenizer.json says 8, prompts
 * "query: " / "passage: "). Every expected vector is recomputed from the fixture's weights.
 */

const model = loadTinyModel('tiny-bert-mean');
const ATOL = 2e-5;
const wrap = (...tokens: string[]): string[] => ['[CLS]', ...tokens, '[SEP]'];

interface Expectation {
  /** Positions before this one are left out of the mean (prompt tokens with include_prompt false). */
  pooledFrom?: number;
  normalize?: boolean;
  /** Override what the graph sees (used to build the "wrong" alternatives). */
  input?: Partial<SequenceInput>;
}

function embedding(tokens: readonly string[], options: Expectation = {}): number[] {
  const ids = model.ids(tokens);
  const outputs = tokenOutputs(model, { ids, ...options.input });
  const pooled = meanPool(outputs, (t) => t >= (options.pooledFrom ?? 0));
  return options.normalize === false ? pooled : l2Normalize(pooled);
}

const CASES = [
  { text: 'the cat sat on the mat.', tokens: wrap('the', 'cat', 'sat', 'on', 'the', 'mat', '.') },
  { text: 'Unbelievable tokenizers!', tokens: wrap('un', '##believ', '##able', 'token', '##izer', '##s', '!') },
  { text: 'Café naïve in Zürich', tokens: wrap('cafe', 'naive', 'in', 'zu', '##rich') },
  { text: '日本 🙂', tokens: wrap('日', '[UNK]', '[UNK]') },
  { text: 'xyzzy', tokens: wrap('[UNK]') },
  { text: '', tokens: wrap() },
];

const SENTENCE = 'the big red dog runs to the old house by the river';
const SENTENCE_TOKENS = ['the', 'big', 'red', 'dog', 'runs', 'to', 'the', 'old', 'house', 'by', 'the', 'river'];

let engine: InferenceEngine;
beforeAll(() => {
  engine = new InferenceEngine();
});
afterAll(async () => {
  await engine.close();
});

describe('dense family: tiny-bert-mean', () => {
  it('is detected as mean-pooled and normalized, with max_seq_length (24) over tokenizer.json (8)', async () => {
    const profile = await engine.profile(model.dir);
    expect(profile.family).toBe('dense');
    expect(profile.options).toMatchObject({ pooling: 'mean', normalize: true, includePrompt: false });
    expect(profile.maxLength).toBe(24);
    expect(profile.positionRule).toBe('arange');
    expect(profile.tokenizer).toMatchObject({ padId: 0, paddingSide: 'right' });
    expect(profile.rolePrompts).toEqual({ query: 'query', document: 'passage' });
  });

  it('tokenizes with the uncased WordPiece vocabulary: accents stripped, CJK split, [UNK] words', async () => {
    const result = await engine.tokenize({ model: model.dir, items: CASES.map((c) => c.text) });
    expect(result.items.map((item) => item.tokens)).toEqual(CASES.map((c) => c.tokens));
    expect(result.items.map((item) => item.ids)).toEqual(CASES.map((c) => model.ids(c.tokens)));
    expect(result.items.every((item) => !item.truncated)).toBe(true);
  });

  it('embeds each text on its own as the reference does', async () => {
    for (const kase of CASES) {
      const result = await engine.encode({ model: model.dir, items: [kase.text] });
      expectAllClose(result.items[0]?.dense ?? [], embedding(kase.tokens), ATOL, JSON.stringify(kase.text));
    }
  });

  it('gives each text of a padded batch the embedding it has alone', async () => {
    // Lengths 9, 9, 7, 5, 3, 2: within the batcher's padding slack, so they share one padded batch.
    const result = await engine.encode({ model: model.dir, items: CASES.map((c) => c.text) });
    expect(result.items.map((item) => item.index)).toEqual(CASES.map((_, i) => i));
    CASES.forEach((kase, i) => expectAllClose(result.items[i]?.dense ?? [], embedding(kase.tokens), ATOL, `batch item ${i}`));
    expect(result.usage.tokens).toBe(CASES.reduce((sum, c) => sum + c.tokens.length, 0));
    // The check is sharp: a short row padded on the wrong side (positions shifted by the padding)
    // or pooled over its [PAD] tokens would come out clearly different.
    const short = CASES[4]?.tokens ?? [];
    const shifted = embedding(short, { input: { positions: short.map((_, t) => t + 6) } });
    expect(maxAbsDiff(shifted, embedding(short))).toBeGreaterThan(1e-2);
    const withPads = [...short, '[PAD]', '[PAD]', '[PAD]'];
    expect(maxAbsDiff(embedding(withPads), embedding(short))).toBeGreaterThan(1e-2);
  });

  it('cuts texts longer than max_seq_length to 24 tokens, keeping the closing [SEP]', async () => {
    const text = `${SENTENCE} ${SENTENCE} ${SENTENCE}`;
    const words = [...SENTENCE_TOKENS, ...SENTENCE_TOKENS, ...SENTENCE_TOKENS];
    const kept = wrap(...words.slice(0, 22));
    const tokenized = await engine.tokenize({ model: model.dir, items: [text] });
    expect(tokenized.items[0]).toMatchObject({ tokens: kept, truncated: true, length: words.length + 2 });
    const result = await engine.encode({ model: model.dir, items: [text, 'a dog'] });
    expect(result.items[0]?.truncated).toBe(true);
    expect(result.items[1]?.truncated).toBeUndefined();
    expectAllClose(result.items[0]?.dense ?? [], embedding(kept), ATOL, 'truncated');
    expectAllClose(result.items[1]?.dense ?? [], embedding(wrap('a', 'dog')), ATOL, 'short');
  });

  it('honours a request max_length below the model default', async () => {
    const result = await engine.encode({ model: model.dir, items: [SENTENCE], max_length: 6 });
    expect(result.items[0]?.truncated).toBe(true);
    expectAllClose(result.items[0]?.dense ?? [], embedding(wrap(...SENTENCE_TOKENS.slice(0, 4))), ATOL, 'max_length 6');
  });

  it('returns the raw mean when normalize is false', async () => {
    const text = CASES[0]?.text ?? '';
    const result = await engine.encode({ model: model.dir, items: [text], normalize: false });
    const raw = embedding(CASES[0]?.tokens ?? [], { normalize: false });
    expectAllClose(result.items[0]?.dense ?? [], raw, ATOL, 'unnormalized');
    expect(Math.abs(Math.hypot(...raw) - 1)).toBeGreaterThan(1e-2);
  });

  it('leaves [CLS] and the query prompt out of the mean (include_prompt false), though the model reads them', async () => {
    const tokens = wrap('query', ':', 'where', 'do', 'cats', 'live', '?');
    const tokenized = await engine.tokenize({ model: model.dir, items: ['where do cats live?'], role: 'query' });
    expect(tokenized.items[0]?.tokens).toEqual(tokens);
    const result = await engine.encode({ model: model.dir, items: [{ text: 'where do cats live?', role: 'query' }, 'where do cats live?'] });
    const expected = embedding(tokens, { pooledFrom: 3 });
    expectAllClose(result.items[0]?.dense ?? [], expected, ATOL, 'query with prompt');
    expect(maxAbsDiff(expected, embedding(tokens))).toBeGreaterThan(1e-2);
    expectAllClose(result.items[1]?.dense ?? [], embedding(wrap('where', 'do', 'cats', 'live', '?')), ATOL, 'no role, no prompt');
  });

  it('scores documents by cosine similarity, query and passage prompts applied', async () => {
    const query = 'where do cats live?';
    const documents = ['cats live in houses', 'the dog runs in the park', 'fish live in the river'];
    const result = await engine.score({ model: model.dir, query, items: documents });
    const q = embedding(wrap('query', ':', 'where', 'do', 'cats', 'live', '?'), { pooledFrom: 3 });
    const passage = (text: string): number[] => embedding(wrap('passage', ':', ...text.split(' ')), { pooledFrom: 3 });
    const expected = documents.map((d) => cosine(q, passage(d)));
    const order = expected.map((_, i) => i).sort((a, b) => (expected[b] ?? 0) - (expected[a] ?? 0));
    expect(result.scores.map((s) => s.index)).toEqual(order);
    result.scores.forEach((s) => expect(Math.abs(s.score - (expected[s.index] ?? Number.NaN))).toBeLessThanOrEqual(ATOL));
  });
});
