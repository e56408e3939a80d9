import { afterAll, beforeAll, expect, it } from 'vitest';
import { z } from 'zod';
import { InferenceEngine } from '../../pipelines/inference/engine.js';
import { conformanceSuite, expectAllClose, numberMatrix, type ConformanceModel } from '../helpers/conformance.js';

/** Dense embedding families of the kit, through the public encode/tokenize API. */

const Inputs = z.looseObject({
  texts: z.array(z.string()).optional(),
  prompt_name: z.string().optional(),
});

let engine: InferenceEngine;
beforeAll(() => {
  engine = new InferenceEngine();
});
afterAll(async () => {
  await engine.close();
});

function denseSuite(model: ConformanceModel): void {
  for (const kase of model.cases.cases) {
    const inputs = Inputs.parse(kase.inputs);
    if (inputs.texts === undefined) continue;
    const texts = inputs.texts;
    const prompt = inputs.prompt_name;
    it(`${kase.id}: token ids are exact`, async () => {
      const result = await engine.tokenize({ model: model.dir, items: texts, ...(prompt === undefined ? {} : { prompt }) });
      const encodings = kase.encodings ?? [];
      expect(result.items.map((i) => i.ids)).toEqual(encodings.map((e) => e.input_ids));
    });
    it(`${kase.id}: embeddings within atol ${model.atol}`, async () => {
      const result = await engine.encode({ model: model.dir, items: texts, ...(prompt === undefined ? {} : { prompt }) });
      const expected = numberMatrix(z.looseObject({ embeddings: z.unknown() }).parse(kase.expected).embeddings, 'embeddings');
      expect(result.items).toHaveLength(expected.length);
      result.items.forEach((item, i) => {
        expect(item.index).toBe(i);
        expectAllClose(item.dense ?? [], expected[i] ?? [], model.atol, `${kase.id}[${i}]`);
      });
    });
  }
}

const DENSE_MODELS = [
  'bert-mean-embed',
  'bert-cls-embed',
  'xlmr-mean-embed',
  'qwen2-last-embed',
  'bench-minilm-l6',
  // Byte-level BPE with [CLS]/[SEP] and no token_type_ids input; rotary and local attention live in the graph.
  'modernbert-mean-embed',
  // 1_Pooling include_prompt: false: [CLS] and the prompt's tokens are left out of the mean.
  'bert-exclude-prompt-embed',
  // Pooling → Dense → Dense → Normalize finished inside the graph: the embedding is `sentence_embedding`.
  'dense-projection-embed',
  // A decoder exported with a KV cache: every past_key_values.* is fed empty, present.* is never fetched.
  'qwen3-kv-embed',
];
for (const name of DENSE_MODELS) {
  conformanceSuite(name, denseSuite);
}
