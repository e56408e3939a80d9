import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { z } from 'zod';
import { colbert } from '../../adapters/models/colbert/colbert.js';
import { noImageReader } from '../../adapters/models/family.js';
import { createSession } from '../../adapters/runtime/ort-session.js';
import { RuntimeOptions } from '../../adapters/runtime/runtime-options.js';
import { TextTokenizer } from '../../adapters/tokenizers/text-tokenizer.js';
import { InferenceEngine } from '../../pipelines/inference/engine.js';
import { parseCatalog } from '../../pipelines/inference/catalog.js';
import { conformanceDir, conformanceSuite, expectAllClose, numberMatrix, type ConformanceModel } from '../helpers/conformance.js';

/**
 * ColBERT late interaction (bert-colbert): role-specific token ids, query vectors with the [MASK]
 * expansion, document vectors without padding and punctuation, MaxSim scores and their ranking,
 * and the attend_to_mask_tokens=true variant through a catalog options override.
 */

const Encoding = z.looseObject({ input_ids: z.array(z.number()), truncated: z.boolean().optional(), untruncated_length: z.number().optional() });
const ColbertCase = z.looseObject({
  id: z.string(),
  inputs: z.looseObject({ queries: z.array(z.string()), documents: z.array(z.string()) }),
  query_encodings: z.array(Encoding),
  document_encodings: z.array(Encoding),
  skiplist_token_ids: z.array(z.number()),
  expected: z.looseObject({
    query_vectors: z.array(z.unknown()),
    document_vectors: z.array(z.unknown()),
    document_kept_positions: z.array(z.array(z.number())),
    maxsim_scores: z.array(z.array(z.number())),
  }),
  variant_attend_to_mask_tokens_true: z.looseObject({
    query_vectors: z.array(z.unknown()),
    maxsim_scores: z.array(z.array(z.number())),
  }),
});
type ColbertCase = z.infer<typeof ColbertCase>;

const KIT_MODEL = 'bert-colbert';
const ATTENDING = 'colbert-attend-to-mask';

let engine: InferenceEngine;

beforeAll(() => {
  // The same kit folder twice: as itself, and as a catalog entry with attend_to_mask_tokens on.
  const catalog = parseCatalog({ models: { [ATTENDING]: { source: conformanceDir(KIT_MODEL), options: { attendToMaskTokens: true } } } }, 'colbert test');
  engine = new InferenceEngine({ catalog });
});
afterAll(async () => {
  await engine.close();
});

function expectVectors(actual: number[][] | undefined, expected: unknown, atol: number, label: string): void {
  const matrix = numberMatrix(expected, label);
  expect(actual, label).toBeDefined();
  expect(actual?.length, `${label} vector count`).toBe(matrix.length);
  matrix.forEach((row, i) => expectAllClose(actual?.[i] ?? [], row, atol, `${label}[${i}]`));
}

/** Indices of `scores` from best to worst (ties by index), like the engine's score order. */
function ranking(scores: readonly number[]): number[] {
  return scores.map((_, i) => i).sort((a, b) => (scores[b] ?? 0) - (scores[a] ?? 0) || a - b);
}

async function expectScores(model: string, kase: ColbertCase, expected: number[][], atol: number): Promise<void> {
  for (const [q, query] of kase.inputs.queries.entries()) {
    const result = await engine.score({ model, query, items: kase.inputs.documents });
    const want = expected[q] ?? [];
    expect(result.scores.map((s) => s.index), `query ${q} ranking`).toEqual(ranking(want));
    const byIndex = [...result.scores].sort((a, b) => a.index - b.index).map((s) => s.score);
    expectAllClose(byIndex, want, atol, `query ${q} maxsim`);
  }
}

function colbertSuite(model: ConformanceModel): void {
  for (const raw of model.cases.cases) {
    const kase = ColbertCase.parse(raw);
    const { queries, documents } = kase.inputs;

    it(`${kase.id}: detected as colbert with the kit's marker, mask and skiplist ids`, async () => {
      const profile = await engine.profile(model.dir);
      expect(profile.family).toBe('colbert');
      expect(profile.options).toMatchObject({ queryMaxLength: 32, docMaxLength: 180, queryMarkerId: 1, documentMarkerId: 2, maskId: 103, dim: 128 });
      expect(profile.options.skiplist).toEqual([...kase.skiplist_token_ids].sort((a, b) => a - b));
    });

    it(`${kase.id}: query and document token ids are exact`, async () => {
      const asQueries = await engine.tokenize({ model: model.dir, items: queries, role: 'query' });
      expect(asQueries.items.map((i) => i.ids)).toEqual(kase.query_encodings.map((e) => e.input_ids));
      expect(asQueries.items.map((i) => i.truncated)).toEqual(kase.query_encodings.map((e) => e.truncated));
      expect(asQueries.items.map((i) => i.length)).toEqual(kase.query_encodings.map((e) => e.untruncated_length));
      const asDocuments = await engine.tokenize({ model: model.dir, items: documents });
      expect(asDocuments.items.map((i) => i.ids)).toEqual(kase.document_encodings.map((e) => e.input_ids));
    });

    it(`${kase.id}: a request max_length shortens documents, never queries`, async () => {
      const result = await engine.tokenize({ model: model.dir, items: [{ text: documents[3] ?? '' }, { text: queries[0] ?? '', role: 'query' }], max_length: 10 });
      const fullDocument = kase.document_encodings[3]?.input_ids ?? [];
      expect(result.items[0]?.ids).toEqual([...fullDocument.slice(0, 9), 102]);
      expect(result.items[0]?.truncated).toBe(true);
      expect(result.items[1]?.ids).toEqual(kase.query_encodings[0]?.input_ids);
    });

    it(`${kase.id}: query vectors (all 32, [MASK] expansion included) within atol ${model.atol}`, async () => {
      const result = await engine.encode({ model: model.dir, items: queries, role: 'query' });
      result.items.forEach((item, i) => expectVectors(item.multivector, kase.expected.query_vectors[i], model.atol, `query ${i}`));
    });

    it(`${kase.id}: document vectors (padding and punctuation dropped) within atol ${model.atol}`, async () => {
      const result = await engine.encode({ model: model.dir, items: documents });
      result.items.forEach((item, i) => {
        expect(item.multivector?.length, `document ${i} kept positions`).toBe(kase.expected.document_kept_positions[i]?.length);
        expectVectors(item.multivector, kase.expected.document_vectors[i], model.atol, `document ${i}`);
      });
    });

    it(`${kase.id}: one encode request with a role per item`, async () => {
      // Interleaved roles land in one engine batch: each must still get its own encoding.
      const items = queries.flatMap((query, i) => [
        { text: query, role: 'query' as const },
        { text: documents[i] ?? '', role: 'document' as const },
      ]);
      const result = await engine.encode({ model: model.dir, items });
      expect(result.items).toHaveLength(items.length);
      queries.forEach((_, i) => {
        expect(result.items[2 * i]?.multivector).toHaveLength(32);
        expectVectors(result.items[2 * i]?.multivector, kase.expected.query_vectors[i], model.atol, `mixed query ${i}`);
        expectVectors(result.items[2 * i + 1]?.multivector, kase.expected.document_vectors[i], model.atol, `mixed document ${i}`);
      });
    });

    it(`${kase.id}: the runner handles one batch holding both roles`, async () => {
      // Called directly, so the batch surely mixes roles whatever the engine's packing policy.
      const profile = await engine.profile(model.dir);
      const tokenizer = await TextTokenizer.load(model.dir);
      const items = [
        { text: documents[3] ?? '', role: 'document' as const },
        { text: queries[1] ?? '', role: 'query' as const },
        { text: documents[1] ?? '', role: 'document' as const },
        { text: queries[3] ?? '', role: 'query' as const },
      ];
      const prepared = await colbert.prepare({ profile, tokenizer, readImage: noImageReader }, { task: 'encode', items, maxLength: profile.maxLength });
      const runtime = RuntimeOptions.parse({ intraOpThreads: 1 });
      const runner = await colbert.createRunner({
        profile,
        runtime,
        openSession: (component) => createSession(join(profile.dir, profile.onnx[component] ?? ''), runtime),
      });
      try {
        const outputs = await runner.run(prepared, { outputs: ['multivector'] });
        expectVectors(outputs[0]?.multivector, kase.expected.document_vectors[3], model.atol, 'runner document 3');
        expectVectors(outputs[1]?.multivector, kase.expected.query_vectors[1], model.atol, 'runner query 1');
        expectVectors(outputs[2]?.multivector, kase.expected.document_vectors[1], model.atol, 'runner document 1');
        expectVectors(outputs[3]?.multivector, kase.expected.query_vectors[3], model.atol, 'runner query 3');
      } finally {
        await runner.release();
      }
    });

    it(`${kase.id}: MaxSim scores and ranking match the kit`, async () => {
      await expectScores(model.dir, kase, kase.expected.maxsim_scores, model.atol);
    });

    it(`${kase.id}: attend_to_mask_tokens=true variant (catalog override): same ids, its own vectors and scores`, async () => {
      const variant = kase.variant_attend_to_mask_tokens_true;
      const profile = await engine.profile(ATTENDING);
      expect(profile.options.attendToMaskTokens).toBe(true);
      const tokenized = await engine.tokenize({ model: ATTENDING, items: queries, role: 'query' });
      expect(tokenized.items.map((i) => i.ids)).toEqual(kase.query_encodings.map((e) => e.input_ids));
      const encoded = await engine.encode({ model: ATTENDING, items: queries, role: 'query' });
      encoded.items.forEach((item, i) => expectVectors(item.multivector, variant.query_vectors[i], model.atol, `attending query ${i}`));
      await expectScores(ATTENDING, kase, variant.maxsim_scores, model.atol);
    });
  }
}

conformanceSuite(KIT_MODEL, colbertSuite);
