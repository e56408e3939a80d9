import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { Engine } from '../../../../adapters/protocol/engine.js';
import { ErrorCode } from '../../../../adapters/protocol/errors.js';
import type { EncodeResult } from '../../../../adapters/protocol/results.js';
import { encodeInRequests, type StageItem } from '../../../../pipelines/documents/stages/batched-encode.js';
import { encodeDense } from '../../../../pipelines/documents/stages/encode.js';
import { encodeMultivector } from '../../../../pipelines/documents/stages/encode-multivector.js';
import { encodeSparse } from '../../../../pipelines/documents/stages/encode-sparse.js';
import { InferenceEngine } from '../../../../pipelines/inference/engine.js';
import { FIXTURES_DIR } from '../../../helpers/shared.js';

/**
 * The request loop the dense, sparse and multi-vector encode stages share, on the real engine
 * with the tiny fixture models: texts split over several requests come back in order, equal to
 * one request of them all; an answer that lacks a text's vector fails the call instead of
 * shifting the later vectors onto the wrong texts.
 */

const engine = new InferenceEngine({ sources: { modelDirs: [join(FIXTURES_DIR, 'models')], allowDownload: false }, runtime: { intraOpThreads: 1 }, memoryBudget: '1GiB' });
afterAll(() => engine.close());

const TEXTS = ['rain in paris on monday', 'whisk the eggs with sugar', 'the bond market fell', 'a cat on the mat', 'bake for forty minutes'];

/** The real engine, with each answer rewritten (items reordered or dropped) before the stage sees it. */
function rewriting(rewrite: (result: EncodeResult) => EncodeResult): Engine {
  return {
    encode: async (request, call) => rewrite(await engine.encode(request, call)),
    score: (request, call) => engine.score(request, call),
    extract: (request, call) => engine.extract(request, call),
    tokenize: (request, call) => engine.tokenize(request, call),
    // The shared engine is closed once, after all tests.
    close: async () => undefined,
  };
}

const denseRequest = { model: 'tiny-bert-mean', output_types: ['dense' as const], role: 'document' as const, priority: 'bulk' as const };
const dense = (item: StageItem): number[] | undefined => (item.dense === undefined ? undefined : Array.from(item.dense));

describe('encodeInRequests', () => {
  it('gives, over requests of 2 items, the vectors of one request of all 5, in text order', async () => {
    const whole = await engine.encode({ ...denseRequest, items: TEXTS.map((text) => ({ text })) });
    const reversed = rewriting((result) => ({ ...result, items: [...result.items].reverse() }));
    const split = await encodeInRequests(reversed, TEXTS, { requestItems: 2, request: denseRequest, vectorOf: dense, missing: { what: 'dense vector' } }, {});
    expect(split).toHaveLength(TEXTS.length);
    split.forEach((vector, index) => {
      const expected = whole.items.find((item) => item.index === index)?.dense ?? [];
      expect(vector).toHaveLength(expected.length);
      vector.forEach((value, at) => expect(value).toBeCloseTo(expected[at] ?? Number.NaN, 5));
    });
  });

  it('fails with INFERENCE_FAILED, naming the item, when an answer lacks one text', async () => {
    const lossy = rewriting((result) => ({ ...result, items: result.items.filter((item) => item.index !== 1) }));
    const encoding = encodeInRequests(lossy, TEXTS, { requestItems: 2, request: denseRequest, vectorOf: dense, missing: { what: 'dense vector', hint: 'a hint' } }, {});
    await expect(encoding).rejects.toMatchObject({ code: ErrorCode.INFERENCE_FAILED, message: 'model tiny-bert-mean returned no dense vector for item 1 (a hint)' });
    // The stage over it says the same.
    await expect(encodeDense(lossy, TEXTS, { model: 'tiny-bert-mean', role: 'document' })).rejects.toMatchObject({
      code: ErrorCode.INFERENCE_FAILED,
      message: 'model tiny-bert-mean returned no dense vector for item 1',
    });
  });

  it('keeps dense vectors typed on an engine that has encodeTyped, with the values the wire path gives for every output type', async () => {
    // `rewriting` has no encodeTyped: the stage goes through encode() and number[] there.
    const wire = rewriting((result) => result);
    for (const dtype of ['float32', 'float16', 'int8', 'binary'] as const) {
      const typed = await encodeDense(engine, TEXTS, { model: 'tiny-bert-mean', role: 'document', dtype });
      const fromWire = await encodeDense(wire, TEXTS, { model: 'tiny-bert-mean', role: 'document', dtype });
      expect(typed.map((vector) => Array.from(vector)), dtype).toEqual(fromWire.map((vector) => Array.from(vector)));
      expect(typed.every((vector) => vector.length > 0), dtype).toBe(true);
    }
  });

  it('serves the dense, sparse and multi-vector stages', async () => {
    const denseVectors = await encodeDense(engine, TEXTS, { model: 'tiny-bert-mean', role: 'document' });
    expect(denseVectors.map((vector) => vector instanceof Float32Array && vector.length > 0)).toEqual(TEXTS.map(() => true));
    const sparse = await encodeSparse(engine, TEXTS, { model: 'tiny-splade', role: 'document' });
    expect(sparse).toHaveLength(TEXTS.length);
    for (const vector of sparse) expect(vector.indices.length).toBe(vector.values.length);
    const tokens = await encodeMultivector(engine, TEXTS, { model: 'tiny-colbert', role: 'document' });
    expect(tokens).toHaveLength(TEXTS.length);
    for (const vector of tokens) expect(vector.length).toBeGreaterThan(0);
  });
});
