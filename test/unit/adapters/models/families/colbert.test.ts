import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InferenceEngine } from '../../../../../pipelines/inference/engine.js';
import { parseCatalog } from '../../../../../pipelines/inference/catalog.js';
import { expectAllClose } from '../../../../helpers/conformance.js';
import { dot, l2Normalize, loadTinyModel, maxAbsDiff, tokenOutputs } from '../../../../helpers/tiny-model.js';

/**
 * ColBERT family (fixture tiny-colbert: HF_ColBERT with artifact.metadata dim 8, query_maxlen 12,
 * doc_maxlen 16, [unused0]/[unused1] markers, mask_punctuation, attend_to_mask_tokens false; the
 * graph takes no token_type_ids). Queries: ". " + query cut to 10 tokens, [CLS] … [SEP], the "."
 * replaced by [unused0], padded to 12 with [MASK] under attention 0, all 12 vectors kept.
 * Documents: the same with [unused1], cut to 16, punctuation and padding dropped. MaxSim scores.
 */

const model = loadTinyModel('tiny-colbert');
const ATOL = 2e-5;
const QUERY_LENGTH = 12;
const PUNCTUATION = [...'!"#$%&\'()*+,-./:;<=>?@[\\]^_`{|}~'];
const ATTENDING = 'tiny-colbert-attending';

function queryTokens(words: readonly string[]): { tokens: string[]; mask: number[] } {
  const real = ['[CLS]', '[unused0]', ...words.slice(0, QUERY_LENGTH - 3), '[SEP]'];
  const tokens = [...real, ...new Array<string>(QUERY_LENGTH - real.length).fill('[MASK]')];
  return { tokens, mask: tokens.map((_, t) => (t < real.length ? 1 : 0)) };
}

function queryVectors(words: readonly string[], attendToMask = false): number[][] {
  const { tokens, mask } = queryTokens(words);
  const outputs = tokenOutputs(model, { ids: model.ids(tokens), mask: attendToMask ? undefined : mask });
  return outputs.map((v) => l2Normalize(v));
}

function documentTokens(words: readonly string[], maxLength = 16): string[] {
  return ['[CLS]', '[unused1]', ...words.slice(0, maxLength - 3), '[SEP]'];
}

/** Kept document vectors: every position but punctuation, L2-normalized. */
function documentVectors(words: readonly string[], maxLength = 16): number[][] {
  const tokens = documentTokens(words, maxLength);
  const outputs = tokenOutputs(model, { ids: model.ids(tokens) });
  return outputs.filter((_, t) => !PUNCTUATION.includes(tokens[t] ?? '')).map((v) => l2Normalize(v));
}

function maxSim(query: readonly number[][], document: readonly number[][]): number {
  return query.reduce((sum, q) => sum + Math.max(...document.map((d) => dot(q, d))), 0);
}

function expectVectors(actual: number[][] | undefined, expected: number[][], label: string): void {
  expect(actual?.length, `${label}: vector count`).toBe(expected.length);
  expected.forEach((row, i) => expectAllClose(actual?.[i] ?? [], row, ATOL, `${label}[${i}]`));
}

const QUERIES = [
  { text: 'where do cats live?', words: ['where', 'do', 'cats', 'live', '?'] },
  { text: 'who is Alice', words: ['who', 'is', 'alice'] },
  {
    text: 'the big red dog runs to the old house by the river',
    words: ['the', 'big', 'red', 'dog', 'runs', 'to', 'the', 'old', 'house', 'by', 'the', 'river'],
  },
];
const DOCUMENTS = [
  { text: 'Cats live in houses, mostly.', words: ['cats', 'live', 'in', 'houses', ',', 'mostly', '.'] },
  { text: 'Alice Smith works for Acme Corp in Paris!', words: ['alice', 'smith', 'works', 'for', 'acme', 'corp', 'in', 'paris', '!'] },
  { text: 'the dog (a big one) runs: fast & far.', words: ['the', 'dog', '(', 'a', 'big', 'one', ')', 'runs', ':', 'fast', '&', 'far', '.'] },
  {
    text: 'the big red dog runs to the old house by the river and the cat sat on the mat',
    words: ['the', 'big', 'red', 'dog', 'runs', 'to', 'the', 'old', 'house', 'by', 'the', 'river', 'and', 'the', 'cat', 'sat', 'on', 'the', 'mat'],
  },
];

let engine: InferenceEngine;
beforeAll(() => {
  const catalog = parseCatalog({ models: { [ATTENDING]: { source: model.dir, options: { attendToMaskTokens: true } } } }, 'colbert fixture test');
  engine = new InferenceEngine({ catalog });
});
afterAll(async () => {
  await engine.close();
});

describe('colbert family: tiny-colbert', () => {
  it('is detected from artifact.metadata with its markers, [MASK] and punctuation skiplist', async () => {
    const profile = await engine.profile(model.dir);
    expect(profile.family).toBe('colbert');
    expect(profile.options).toMatchObject({
      queryMaxLength: 12,
      docMaxLength: 16,
      queryMarkerId: model.id('[unused0]'),
      documentMarkerId: model.id('[unused1]'),
      maskId: model.id('[MASK]'),
      maskPunctuation: true,
      attendToMaskTokens: false,
      dim: 8,
    });
    expect(profile.options.skiplist).toEqual(model.ids(PUNCTUATION).sort((a, b) => a - b));
  });

  it('tokenizes queries with [unused0] and [MASK] expansion to 12, documents with [unused1]', async () => {
    const queries = await engine.tokenize({ model: model.dir, items: QUERIES.map((q) => q.text), role: 'query' });
    expect(queries.items.map((i) => i.tokens)).toEqual(QUERIES.map((q) => queryTokens(q.words).tokens));
    expect(queries.items.map((i) => i.truncated)).toEqual([false, false, true]);
    const documents = await engine.tokenize({ model: model.dir, items: DOCUMENTS.map((d) => d.text) });
    expect(documents.items.map((i) => i.tokens)).toEqual(DOCUMENTS.map((d) => documentTokens(d.words)));
    expect(documents.items.map((i) => i.truncated)).toEqual([false, false, false, true]);
  });

  it('keeps all 12 query vectors, [MASK] expansion included, with attention 0 on the [MASK]s', async () => {
    const result = await engine.encode({ model: model.dir, items: QUERIES.map((q) => q.text), role: 'query' });
    QUERIES.forEach((q, i) => expectVectors(result.items[i]?.multivector, queryVectors(q.words), `query ${i}`));
    // Attending to the [MASK]s would give other vectors: the mask really reaches the graph.
    expect(maxAbsDiff((queryVectors(QUERIES[0]?.words ?? [], true)[0]) ?? [], queryVectors(QUERIES[0]?.words ?? [])[0] ?? [])).toBeGreaterThan(1e-2);
  });

  it('attends to the [MASK]s when the catalog sets attendToMaskTokens', async () => {
    const result = await engine.encode({ model: ATTENDING, items: [QUERIES[0]?.text ?? ''], role: 'query' });
    expectVectors(result.items[0]?.multivector, queryVectors(QUERIES[0]?.words ?? [], true), 'attending query');
  });

  it('drops padding and punctuation from document vectors, in a padded batch', async () => {
    const result = await engine.encode({ model: model.dir, items: DOCUMENTS.map((d) => d.text) });
    DOCUMENTS.forEach((d, i) => expectVectors(result.items[i]?.multivector, documentVectors(d.words), `document ${i}`));
    expect(result.items.map((item) => item.multivector?.length)).toEqual([8, 11, 11, 16]);
  });

  it('cuts documents to a request max_length, never queries', async () => {
    const result = await engine.encode({
      model: model.dir,
      items: [{ text: DOCUMENTS[3]?.text ?? '' }, { text: QUERIES[0]?.text ?? '', role: 'query' }],
      max_length: 8,
    });
    expectVectors(result.items[0]?.multivector, documentVectors(DOCUMENTS[3]?.words ?? [], 8), 'short document');
    expectVectors(result.items[1]?.multivector, queryVectors(QUERIES[0]?.words ?? []), 'query unchanged');
  });

  it('scores documents by MaxSim over the query vectors', async () => {
    for (const query of QUERIES) {
      const result = await engine.score({ model: model.dir, query: query.text, items: DOCUMENTS.map((d) => d.text) });
      const q = queryVectors(query.words);
      const expected = DOCUMENTS.map((d) => maxSim(q, documentVectors(d.words)));
      const order = expected.map((_, i) => i).sort((a, b) => (expected[b] ?? 0) - (expected[a] ?? 0));
      expect(result.scores.map((s) => s.index), query.text).toEqual(order);
      result.scores.forEach((s) => expect(Math.abs(s.score - (expected[s.index] ?? Number.NaN))).toBeLessThanOrEqual(1e-4));
    }
  });
});
