import { afterAll, beforeAll, expect, it } from 'vitest';
import { z } from 'zod';
import type { SparseVector } from '../../adapters/protocol/results.js';
import { sparseDot } from '../../adapters/model-threads/similarity.js';
import { InferenceEngine } from '../../pipelines/inference/engine.js';
import { conformanceSuite, expectAllClose, type ConformanceModel } from '../helpers/conformance.js';

/**
 * SPLADE sparse embeddings through the public API: token ids, the sparse vectors compared as
 * dense vocabulary-sized vectors, the top-10 term order, and score = sparse dot product of the
 * query and document vectors, ranked.
 */

const Inputs = z.looseObject({ texts: z.array(z.string()) });
const ExpectedSparse = z.looseObject({
  nnz: z.number().int(),
  indices: z.array(z.number().int()),
  values: z.array(z.number()),
  top10: z.array(z.tuple([z.number().int(), z.number()])),
  l1_norm: z.number(),
  min_positive: z.number(),
});
type ExpectedSparse = z.infer<typeof ExpectedSparse>;

const VOCAB = 30522;

function toDense(vector: SparseVector | ExpectedSparse): Float64Array {
  const dense = new Float64Array(VOCAB);
  vector.indices.forEach((index, k) => {
    dense[index] = vector.values[k] ?? Number.NaN;
  });
  return dense;
}

/** Ids by descending weight, ties by id (the kit's top10 rule). */
function topIds(vector: SparseVector, k: number): number[] {
  return vector.indices
    .map((index, i) => ({ index, value: vector.values[i] ?? 0 }))
    .sort((a, b) => b.value - a.value || a.index - b.index)
    .slice(0, k)
    .map((entry) => entry.index);
}

function expectedOf(model: ConformanceModel, id: string): { texts: string[]; vectors: ExpectedSparse[] } {
  const kase = model.cases.cases.find((c) => c.id === id);
  if (kase === undefined) throw new Error(`kit case ${id} is missing`);
  return { texts: Inputs.parse(kase.inputs).texts, vectors: z.array(ExpectedSparse).parse(kase.expected) };
}

conformanceSuite('bert-splade', (model: ConformanceModel) => {
  let engine: InferenceEngine;
  beforeAll(() => {
    engine = new InferenceEngine();
  });
  afterAll(async () => {
    await engine.close();
  });

  it('is detected as SPLADE with max pooling from 1_SpladePooling/config.json', async () => {
    const profile = await engine.profile(model.dir);
    expect(profile.family).toBe('splade');
    expect(profile.options).toMatchObject({ pooling: 'max', activation: 'relu' });
  });

  for (const kase of model.cases.cases) {
    const texts = Inputs.parse(kase.inputs).texts;
    const expected = z.array(ExpectedSparse).parse(kase.expected);

    it(`${kase.id}: token ids are exact`, async () => {
      const result = await engine.tokenize({ model: model.dir, items: texts });
      expect(result.items.map((i) => i.ids)).toEqual((kase.encodings ?? []).map((e) => e.input_ids));
    });

    it(`${kase.id}: sparse vectors within atol ${model.atol} as dense ${VOCAB}-vectors, top-10 in order`, async () => {
      const result = await engine.encode({ model: model.dir, items: texts });
      expect(result.items).toHaveLength(expected.length);
      result.items.forEach((item, i) => {
        const want = expected[i];
        const sparse = item.sparse;
        if (want === undefined || sparse === undefined) throw new Error(`${kase.id}[${i}]: missing sparse vector`);
        expect(item.index).toBe(i);
        expect(item.dense).toBeUndefined();
        expect(sparse.values).toHaveLength(sparse.indices.length);
        expect(sparse.indices.every((v, k) => k === 0 || v > (sparse.indices[k - 1] ?? -1)), 'indices strictly ascending').toBe(true);
        expect(sparse.values.every((v) => v > 0), 'only positive weights').toBe(true);
        // Terms within atol of zero may differ between implementations; when the kit's smallest
        // weight is well above atol, the non-zero terms must be exactly the same.
        if (want.min_positive > 10 * model.atol) expect(sparse.indices, `${kase.id}[${i}] indices`).toEqual(want.indices);
        expectAllClose(Array.from(toDense(sparse)), Array.from(toDense(want)), model.atol, `${kase.id}[${i}]`);
        expect(topIds(sparse, 10), `${kase.id}[${i}] top10`).toEqual(want.top10.map(([id]) => id));
        const l1 = sparse.values.reduce((sum, v) => sum + v, 0);
        expect(Math.abs(l1 - want.l1_norm)).toBeLessThanOrEqual(model.atol * want.nnz);
      });
    });
  }

  it('score ranks documents by the sparse dot product with the query', async () => {
    const query = expectedOf(model, 'query');
    const documents = expectedOf(model, 'documents_batch');
    const queryVector = query.vectors[0];
    if (queryVector === undefined) throw new Error('kit query vector missing');
    const dots = documents.vectors.map((doc) => sparseDot(queryVector, doc));
    const order = dots.map((_, i) => i).sort((a, b) => (dots[b] ?? 0) - (dots[a] ?? 0));
    // The kit's documents are separated by far more than any tolerance, so the order is firm.
    for (let k = 1; k < order.length; k++) {
      expect((dots[order[k - 1] ?? 0] ?? 0) - (dots[order[k] ?? 0] ?? 0)).toBeGreaterThan(0.1);
    }
    const result = await engine.score({ model: model.dir, query: query.texts[0] ?? '', items: documents.texts });
    expect(result.scores.map((s) => s.index)).toEqual(order);
    for (const scored of result.scores) {
      const doc = documents.vectors[scored.index];
      // Each weight is within atol, so the dot moves by at most atol × (|q|₁ + |d|₁) (+ atol² terms).
      const bound = model.atol * (queryVector.l1_norm + (doc?.l1_norm ?? 0)) + 1e-6;
      expect(Math.abs(scored.score - (dots[scored.index] ?? Number.NaN)), `document ${scored.index}`).toBeLessThanOrEqual(bound);
    }
  });
});
