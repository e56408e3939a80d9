import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InferenceEngine } from '../../../../../pipelines/inference/engine.js';
import { firstTokenLogit, hiddenStates, loadTinyModel, sigmoid } from '../../../../helpers/tiny-model.js';

/**
 * Cross-encoder family (fixture tiny-cross-encoder: BertForSequenceClassification with one label
 * and sentence_transformers.activation_fn Sigmoid, model_max_length 32). The logit is read at
 * [CLS], which sees the whole pair, so the pair order, the token types (0 for "[CLS] query [SEP]",
 * 1 for "passage [SEP]") and which tokens survive truncation all move the score.
 */

const model = loadTinyModel('tiny-cross-encoder');
const ATOL = 2e-5;
const words = (text: string): string[] => text.split(' ');

interface PairTokens {
  tokens: string[];
  types: number[];
}

function pair(query: readonly string[], passage: readonly string[]): PairTokens {
  const first = ['[CLS]', ...query, '[SEP]'];
  const second = [...passage, '[SEP]'];
  return { tokens: [...first, ...second], types: [...first.map(() => 0), ...second.map(() => 1)] };
}

function score(input: PairTokens): number {
  return sigmoid(firstTokenLogit(model, hiddenStates(model, { ids: model.ids(input.tokens), types: input.types })));
}

const QUERY = 'where do cats live';
const PASSAGES = ['cats live in houses', 'the dog runs in the park', 'fish live in the river', 'a big red bird'];
const LONG_QUERY = 'the big red dog runs to the old house by the river';
const LONG_PASSAGE = 'cats live in houses and dogs live in the park by the river';

let engine: InferenceEngine;
beforeAll(() => {
  engine = new InferenceEngine();
});
afterAll(async () => {
  await engine.close();
});

function expectScores(actual: { index: number; score: number }[], expected: number[]): void {
  const order = expected.map((_, i) => i).sort((a, b) => (expected[b] ?? 0) - (expected[a] ?? 0) || a - b);
  expect(actual.map((s) => s.index)).toEqual(order.slice(0, actual.length));
  for (const s of actual) expect(Math.abs(s.score - (expected[s.index] ?? Number.NaN)), `score of item ${s.index}`).toBeLessThanOrEqual(ATOL);
}

describe('cross-encoder family: tiny-cross-encoder', () => {
  it('is detected as a sigmoid cross-encoder', async () => {
    const profile = await engine.profile(model.dir);
    expect(profile.family).toBe('cross-encoder');
    expect(profile.options).toMatchObject({ activation: 'sigmoid', labelIndex: 0 });
    expect(profile.maxLength).toBe(32);
  });

  it('builds [CLS] query [SEP] passage [SEP]', async () => {
    const result = await engine.tokenize({ model: model.dir, items: [{ text: QUERY, pair: PASSAGES[0] ?? '' }] });
    expect(result.items[0]?.tokens).toEqual(pair(words(QUERY), words(PASSAGES[0] ?? '')).tokens);
  });

  it('scores pairs with sigmoid(logit), best first, indices kept', async () => {
    const result = await engine.score({ model: model.dir, query: QUERY, items: PASSAGES });
    const expected = PASSAGES.map((p) => score(pair(words(QUERY), words(p))));
    expectScores(result.scores, expected);
    expect(result.usage.items).toBe(PASSAGES.length);
    // Sharp: token types all 0, or the segments swapped, give other scores.
    const first = pair(words(QUERY), words(PASSAGES[0] ?? ''));
    expect(Math.abs(score({ ...first, types: first.types.map(() => 0) }) - (expected[0] ?? 0))).toBeGreaterThan(1e-3);
    expect(Math.abs(score(pair(words(PASSAGES[0] ?? ''), words(QUERY))) - (expected[0] ?? 0))).toBeGreaterThan(1e-3);
  });

  it('keeps only the best top_k scores', async () => {
    const result = await engine.score({ model: model.dir, query: QUERY, items: PASSAGES, top_k: 2 });
    expect(result.scores).toHaveLength(2);
    expectScores(result.scores, PASSAGES.map((p) => score(pair(words(QUERY), words(p)))));
  });

  it('truncates longest-first: a short query stays whole, the passage takes the rest', async () => {
    // max_length 16: 13 tokens for text; the 4-token query keeps all, the passage 9 of 13.
    const expectedTokens = pair(words(QUERY), words(LONG_PASSAGE).slice(0, 9));
    const tokenized = await engine.tokenize({ model: model.dir, items: [{ text: QUERY, pair: LONG_PASSAGE }], max_length: 16 });
    expect(tokenized.items[0]).toMatchObject({ tokens: expectedTokens.tokens, truncated: true, length: 4 + 13 + 3 });
    const result = await engine.score({ model: model.dir, query: QUERY, items: [LONG_PASSAGE, PASSAGES[0] ?? ''], max_length: 16 });
    expectScores(result.scores, [score(expectedTokens), score(pair(words(QUERY), words(PASSAGES[0] ?? '')))]);
  });

  it('truncates longest-first: when both are long, the shorter gets floor(budget / 2)', async () => {
    // Query 12 tokens, passage 13; budget 13 → query 6, passage 7.
    const expectedTokens = pair(words(LONG_QUERY).slice(0, 6), words(LONG_PASSAGE).slice(0, 7));
    const tokenized = await engine.tokenize({ model: model.dir, items: [{ text: LONG_QUERY, pair: LONG_PASSAGE }], max_length: 16 });
    expect(tokenized.items[0]?.tokens).toEqual(expectedTokens.tokens);
    const result = await engine.score({ model: model.dir, query: LONG_QUERY, items: [LONG_PASSAGE], max_length: 16 });
    expectScores(result.scores, [score(expectedTokens)]);
  });

  it('truncates longest-first: on a tie the query gets floor(budget / 2)', async () => {
    // Both 12 tokens, budget 13 → query 6, passage 7.
    const tokenized = await engine.tokenize({ model: model.dir, items: [{ text: LONG_QUERY, pair: LONG_QUERY }], max_length: 16 });
    expect(tokenized.items[0]?.tokens).toEqual(pair(words(LONG_QUERY).slice(0, 6), words(LONG_QUERY).slice(0, 7)).tokens);
  });

  it('cannot encode or extract', async () => {
    await expect(engine.encode({ model: model.dir, items: [QUERY] })).rejects.toMatchObject({ code: 'UNSUPPORTED_OPERATION' });
    await expect(engine.extract({ model: model.dir, items: [QUERY] })).rejects.toMatchObject({ code: 'UNSUPPORTED_OPERATION' });
  });
});
