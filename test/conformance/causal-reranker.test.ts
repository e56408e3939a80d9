import { afterAll, beforeAll, expect, it } from 'vitest';
import { z } from 'zod';
import { ErrorCode } from '../../adapters/protocol/errors.js';
import { parseCatalog } from '../../pipelines/inference/catalog.js';
import { InferenceEngine } from '../../pipelines/inference/engine.js';
import { conformanceSuite, type ConformanceModel } from '../helpers/conformance.js';

/**
 * Causal-LM reranking (Qwen3-Reranker layout: Qwen3ForCausalLM with KV-cache inputs) through the
 * public score and tokenize API: the chat prompt's token ids exactly, P(yes) within the kit's
 * tolerance, the ranking, a per-request instruction, and documents cut inside the document part.
 */

const Inputs = z.looseObject({ query: z.string(), documents: z.array(z.string()), instruction: z.string().optional() });
const Expected = z.looseObject({ scores: z.array(z.number()), ranking_best_first: z.array(z.number().int()) });

function rerankerSuite(model: ConformanceModel): void {
  let engine: InferenceEngine;
  const UNREWRITTEN = 'reranker-full-logits';
  beforeAll(() => {
    const catalog = parseCatalog({ models: { [UNREWRITTEN]: { source: model.dir, options: { rewrite: false } } } }, 'causal-reranker test');
    engine = new InferenceEngine({ catalog });
  });
  afterAll(async () => {
    await engine.close();
  });

  it('is detected as a causal-LM reranker by its name, with the no/yes ids of the kit and an empty KV cache', async () => {
    const profile = await engine.profile(model.dir);
    expect(profile.family).toBe('causal-reranker');
    expect(profile.options).toMatchObject({ yesId: 9693, noId: 2152 });
    expect(profile.tokenizer?.paddingSide).toBe('left');
    expect(profile.pastInputs.map((p) => [p.name, p.heads, p.headDim])).toEqual([
      ['past_key_values.0.key', 1, 16],
      ['past_key_values.0.value', 1, 16],
      ['past_key_values.1.key', 1, 16],
      ['past_key_values.1.value', 1, 16],
    ]);
    expect(profile.maxLength).toBe(8192);
  });

  for (const kase of model.cases.cases) {
    const inputs = Inputs.parse(kase.inputs);
    const expected = Expected.parse(kase.expected);
    const instruction = inputs.instruction === undefined ? {} : { instruction: inputs.instruction };

    it(`${kase.id}: prompt token ids are exact`, async () => {
      const result = await engine.tokenize({ model: model.dir, items: inputs.documents.map((d) => ({ text: inputs.query, pair: d })), ...instruction });
      expect(result.items.map((i) => i.ids)).toEqual((kase.encodings ?? []).map((e) => e.input_ids));
    });

    it(`${kase.id}: P(yes) within atol ${model.atol}, ranked best first`, async () => {
      const result = await engine.score({ model: model.dir, query: inputs.query, items: inputs.documents, ...instruction });
      expect(result.scores.map((s) => s.index)).toEqual(expected.ranking_best_first);
      for (const scored of result.scores) {
        const want = expected.scores[scored.index] ?? Number.NaN;
        expect(Math.abs(scored.score - want), `${kase.id} item ${scored.index}`).toBeLessThanOrEqual(model.atol);
      }
      const tokens = (kase.encodings ?? []).reduce((sum, e) => sum + (e.input_ids?.length ?? 0), 0);
      expect(result.usage.tokens).toBe(tokens);
    });
  }

  it('the default instruction differs from the custom one: the custom_instruction case scores differently without it', async () => {
    const kase = model.cases.cases.find((c) => c.id === 'custom_instruction');
    const inputs = Inputs.parse(kase?.inputs);
    const expected = Expected.parse(kase?.expected);
    const result = await engine.score({ model: model.dir, query: inputs.query, items: inputs.documents });
    const first = result.scores.find((s) => s.index === 0)?.score ?? Number.NaN;
    expect(Math.abs(first - (expected.scores[0] ?? 0))).toBeGreaterThan(10 * model.atol);
  });

  it('the graph run as exported (options.rewrite: false, full logits) gives the same scores', async () => {
    const kase = model.cases.cases.find((c) => c.id === 'query_three_documents');
    const inputs = Inputs.parse(kase?.inputs);
    const expected = Expected.parse(kase?.expected);
    const result = await engine.score({ model: UNREWRITTEN, query: inputs.query, items: inputs.documents });
    for (const scored of result.scores) expect(Math.abs(scored.score - (expected.scores[scored.index] ?? Number.NaN))).toBeLessThanOrEqual(model.atol);
    expect((await engine.inspect(UNREWRITTEN)).info.outputs).toContain('logits');
    expect((await engine.inspect(model.dir)).info.outputs).toEqual(['last_token_logits']);
  });

  it('a long document is cut inside the document: prefix, query and suffix kept whole, the token budget counts them', async () => {
    const kase = model.cases.cases.find((c) => c.id === 'long_document');
    const inputs = Inputs.parse(kase?.inputs);
    const full = kase?.encodings?.[0]?.input_ids ?? [];
    // The kit's suffix: <|im_end|> \n <|im_start|> assistant \n <think> \n\n </think> \n\n.
    const suffix = full.slice(-9);
    expect(suffix[0]).toBe(151645);
    const maxLength = 120;
    const cut = await engine.tokenize({ model: model.dir, items: [{ text: inputs.query, pair: inputs.documents[0] ?? '' }], max_length: maxLength });
    const item = cut.items[0];
    expect(item?.ids).toHaveLength(maxLength);
    expect(item?.truncated).toBe(true);
    expect(item?.length).toBe(full.length);
    expect(item?.ids.slice(-suffix.length)).toEqual(suffix);
    expect(item?.ids.slice(0, maxLength - suffix.length)).toEqual(full.slice(0, maxLength - suffix.length));
    const scored = await engine.score({ model: model.dir, query: inputs.query, items: [inputs.documents[0] ?? ''], max_length: maxLength });
    expect(scored.usage.tokens).toBe(maxLength);
    expect(Number.isFinite(scored.scores[0]?.score)).toBe(true);
  });

  it('refuses a max_length that leaves no room for the document, and encode', async () => {
    await expect(engine.score({ model: model.dir, query: 'q', items: ['d'], max_length: 40 })).rejects.toMatchObject({ code: ErrorCode.INPUT_TOO_LARGE });
    await expect(engine.encode({ model: model.dir, items: ['x'] })).rejects.toMatchObject({ code: ErrorCode.UNSUPPORTED_OPERATION });
  });
}

conformanceSuite('qwen3-reranker', rerankerSuite);
