import { afterAll, beforeAll, expect, it } from 'vitest';
import { z } from 'zod';
import { InferenceEngine } from '../../pipelines/inference/engine.js';
import { conformanceSuite, type ConformanceModel } from '../helpers/conformance.js';

/**
 * Pair tokenization through the public tokenize API (`items[].pair`): the model's pair template
 * (BERT `[CLS] A [SEP] B [SEP]`, ModernBERT the same without type ids, XLM-R `<s> A </s></s> B </s>`) and longest-first truncation
 * that keeps the closing separator. Every kit case with `inputs.pairs` is checked token for token.
 */

const PairInputs = z.looseObject({ pairs: z.array(z.tuple([z.string(), z.string()])).optional() });
const Encoding = z.looseObject({
  input_ids: z.array(z.number().int()),
  tokens: z.array(z.string()),
  truncated: z.boolean().optional(),
  untruncated_length: z.number().int().optional(),
});

let engine: InferenceEngine;
beforeAll(() => {
  engine = new InferenceEngine();
});
afterAll(async () => {
  await engine.close();
});

function pairSuite(model: ConformanceModel): void {
  const pairCases = model.cases.cases.filter((kase) => PairInputs.parse(kase.inputs).pairs !== undefined);
  it('the kit has pair cases', () => {
    expect(pairCases.length).toBeGreaterThan(0);
  });
  for (const kase of pairCases) {
    const pairs = PairInputs.parse(kase.inputs).pairs ?? [];
    const maxLength = kase.tokenization?.max_length;
    const expected = z.array(Encoding).parse(kase.encodings);
    it(`${kase.id}: pair token ids, tokens and truncation are exact`, async () => {
      const result = await engine.tokenize({
        model: model.dir,
        items: pairs.map(([text, pair]) => ({ text, pair })),
        ...(maxLength === undefined ? {} : { max_length: maxLength }),
      });
      expect(result.items).toHaveLength(expected.length);
      result.items.forEach((item, i) => {
        const want = expected[i];
        expect(item.index).toBe(i);
        expect(item.ids, `${kase.id}[${i}] ids`).toEqual(want?.input_ids);
        expect(item.tokens, `${kase.id}[${i}] tokens`).toEqual(want?.tokens);
        expect(item.truncated, `${kase.id}[${i}] truncated`).toBe(want?.truncated ?? false);
        expect(item.length, `${kase.id}[${i}] untruncated length`).toBe(want?.untruncated_length ?? want?.input_ids.length);
      });
    });
  }
}

conformanceSuite('bert-cross-encoder', pairSuite);
conformanceSuite('xlmr-mean-embed', pairSuite);
conformanceSuite('modernbert-cross-encoder', pairSuite);
conformanceSuite('xlmr-cross-encoder', pairSuite);
