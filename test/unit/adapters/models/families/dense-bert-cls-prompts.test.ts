import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InferenceEngine } from '../../../../../pipelines/inference/engine.js';
import { expectAllClose } from '../../../../helpers/conformance.js';
import { cosine, l2Normalize, loadTinyModel, maxAbsDiff, tokenOutputs } from '../../../../helpers/tiny-model.js';

/**
 * Dense family, [CLS] pooling with a query prompt (fixture tiny-bert-cls-prompts, BGE-style:
 * config_sentence_transformers.json prompts {query: "Represent this sentence for searching
 * relevant passages: "}, no document prompt). The [CLS] output depends on every token through the
 * fixture's context term, so a missing, doubled or misplaced prompt changes the vector.
 */

const model = loadTinyModel('tiny-bert-cls-prompts');
const ATOL = 2e-5;
const PROMPT_TOKENS = ['represent', 'this', 'sentence', 'for', 'searching', 'relevant', 'passages', ':'];
const wrap = (...tokens: string[]): string[] => ['[CLS]', ...tokens, '[SEP]'];
const words = (text: string): string[] => text.split(' ');

function clsEmbedding(tokens: readonly string[], types?: number[]): number[] {
  const outputs = tokenOutputs(model, { ids: model.ids(tokens), ...(types === undefined ? {} : { types }) });
  return l2Normalize(outputs[0] ?? []);
}

const QUERY = 'where do cats live';

let engine: InferenceEngine;
beforeAll(() => {
  engine = new InferenceEngine();
});
afterAll(async () => {
  await engine.close();
});

describe('dense family: tiny-bert-cls-prompts', () => {
  it('is detected as [CLS]-pooled with a query prompt and no document prompt', async () => {
    const profile = await engine.profile(model.dir);
    expect(profile.family).toBe('dense');
    expect(profile.options).toMatchObject({ pooling: 'cls', normalize: true });
    expect(profile.maxLength).toBe(32);
    expect(profile.prompts).toEqual({ query: 'Represent this sentence for searching relevant passages: ' });
    expect(profile.rolePrompts).toEqual({ query: 'query' });
  });

  it('prepends the query prompt for role query, by prompt name, and not otherwise', async () => {
    const withPrompt = wrap(...PROMPT_TOKENS, ...words(QUERY));
    const plain = wrap(...words(QUERY));
    const result = await engine.tokenize({
      model: model.dir,
      items: [{ text: QUERY, role: 'query' }, { text: QUERY, role: 'document' }, QUERY],
    });
    expect(result.items.map((i) => i.tokens)).toEqual([withPrompt, plain, plain]);
    const named = await engine.tokenize({ model: model.dir, items: [QUERY], prompt: 'query' });
    expect(named.items[0]?.tokens).toEqual(withPrompt);
  });

  it('pools the [CLS] vector of the prompted query', async () => {
    const result = await engine.encode({ model: model.dir, items: [QUERY], role: 'query' });
    const expected = clsEmbedding(wrap(...PROMPT_TOKENS, ...words(QUERY)));
    expectAllClose(result.items[0]?.dense ?? [], expected, ATOL, 'query');
    expect(maxAbsDiff(expected, clsEmbedding(wrap(...words(QUERY))))).toBeGreaterThan(1e-2);
  });

  it('uses a literal prompt_text instead of a named prompt', async () => {
    const result = await engine.encode({ model: model.dir, items: [QUERY], prompt_text: 'search query: ' });
    expectAllClose(result.items[0]?.dense ?? [], clsEmbedding(wrap('search', 'query', ':', ...words(QUERY))), ATOL, 'prompt_text');
  });

  it('rejects an unknown prompt name with INVALID_INPUT', async () => {
    await expect(engine.encode({ model: model.dir, items: [QUERY], prompt: 'nonexistent' })).rejects.toMatchObject({ code: 'INVALID_INPUT' });
  });

  it('gives each text of a padded batch, prompted or not, its own [CLS] vector', async () => {
    const items = [
      { text: 'the cat sat on the mat', role: 'document' as const },
      { text: 'dogs', role: 'query' as const },
      { text: 'a dog runs in the park', role: 'document' as const },
      { text: 'fish', role: 'document' as const },
    ];
    const result = await engine.encode({ model: model.dir, items });
    items.forEach((item, i) => {
      const tokens = item.role === 'query' ? wrap(...PROMPT_TOKENS, ...words(item.text)) : wrap(...words(item.text));
      expectAllClose(result.items[i]?.dense ?? [], clsEmbedding(tokens), ATOL, `item ${i}`);
    });
    // Token type ids must stay 0 for single texts: type 1 would move the [CLS] vector.
    const fish = wrap('fish');
    expect(maxAbsDiff(clsEmbedding(fish, [0, 1, 1]), clsEmbedding(fish))).toBeGreaterThan(1e-2);
  });

  it('scores documents against the prompted query by cosine; documents get no prompt', async () => {
    const documents = ['cats live in houses', 'the cat sat on the mat', 'the dog runs in the park'];
    const result = await engine.score({ model: model.dir, query: QUERY, items: documents, top_k: 2 });
    const q = clsEmbedding(wrap(...PROMPT_TOKENS, ...words(QUERY)));
    const expected = documents.map((d) => cosine(q, clsEmbedding(wrap(...words(d)))));
    const order = expected.map((_, i) => i).sort((a, b) => (expected[b] ?? 0) - (expected[a] ?? 0));
    expect(result.scores.map((s) => s.index)).toEqual(order.slice(0, 2));
    result.scores.forEach((s) => expect(Math.abs(s.score - (expected[s.index] ?? Number.NaN))).toBeLessThanOrEqual(ATOL));
  });
});
