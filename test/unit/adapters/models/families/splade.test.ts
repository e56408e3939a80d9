import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SparseVector } from '../../../../../adapters/protocol/results.js';
import { InferenceEngine } from '../../../../../pipelines/inference/engine.js';
import { expectAllClose } from '../../../../helpers/conformance.js';
import { dot, loadTinyModel, maxAbsDiff, tokenOutputs } from '../../../../helpers/tiny-model.js';

/**
 * SPLADE family (fixture tiny-splade: BertForMaskedLM whose logits cover the fixture vocabulary,
 * modules.json with SpladePooling max/relu, max_seq_length 24). Term weights are
 * w[v] = max over real positions (special tokens included) of log(1 + relu(logit[t, v])).
 */

const model = loadTinyModel('tiny-splade');
const ATOL = 2e-5;
const wrap = (...tokens: string[]): string[] => ['[CLS]', ...tokens, '[SEP]'];
const words = (text: string): string[] => text.split(' ');

/** Dense vocabulary-sized weights; `keep` chooses which positions are pooled. */
function weights(tokens: readonly string[], keep: (t: number) => boolean = () => true): number[] {
  const logits = tokenOutputs(model, { ids: model.ids(tokens) });
  const out = new Array<number>(logits[0]?.length ?? 0).fill(0);
  logits.forEach((row, t) => {
    if (!keep(t)) return;
    row.forEach((x, v) => {
      out[v] = Math.max(out[v] ?? 0, Math.log1p(Math.max(x, 0)));
    });
  });
  return out;
}

function densify(sparse: SparseVector | undefined, size: number): number[] {
  const out = new Array<number>(size).fill(0);
  sparse?.indices.forEach((index, k) => {
    out[index] = sparse.values[k] ?? Number.NaN;
  });
  return out;
}

function expectSparse(actual: SparseVector | undefined, expected: readonly number[], label: string): void {
  expect(actual, label).toBeDefined();
  const indices = actual?.indices ?? [];
  expect(indices, `${label}: indices ascending and unique`).toEqual([...new Set(indices)].sort((a, b) => a - b));
  expect(actual?.values.every((v) => v > 0), `${label}: only positive weights`).toBe(true);
  expectAllClose(densify(actual, expected.length), expected, ATOL, label);
  // Every clearly active term is reported (a weight within atol of 0 may go either way).
  const clear = expected.flatMap((w, v) => (w > ATOL ? [v] : []));
  expect(clear.every((v) => indices.includes(v)), `${label}: all active terms present`).toBe(true);
}

const TEXTS = ['the cat sat on the mat', 'dogs and cats', 'where do cats live?', 'fish'];

let engine: InferenceEngine;
beforeAll(() => {
  engine = new InferenceEngine();
});
afterAll(async () => {
  await engine.close();
});

describe('splade family: tiny-splade', () => {
  it('is detected from SpladePooling with max pooling and relu', async () => {
    const profile = await engine.profile(model.dir);
    expect(profile.family).toBe('splade');
    expect(profile.options).toMatchObject({ pooling: 'max', activation: 'relu' });
    expect(profile.maxLength).toBe(24);
  });

  it('returns sparse term weights, max-pooled over real tokens including [CLS] and [SEP]', async () => {
    const result = await engine.encode({ model: model.dir, items: [TEXTS[0] ?? ''] });
    const tokens = wrap(...words(TEXTS[0] ?? ''));
    const expected = weights(tokens);
    expectSparse(result.items[0]?.sparse, expected, 'single');
    const active = expected.filter((w) => w > 0).length;
    expect(active).toBeGreaterThan(5);
    expect(active).toBeLessThan(expected.length / 2);
    // Leaving the special tokens out would lose or lower terms.
    expect(maxAbsDiff(weights(tokens, (t) => t > 0 && t < tokens.length - 1), expected)).toBeGreaterThan(1e-2);
  });

  it('pools inside the graph: the session returns the term weights, not the logits', async () => {
    expect((await engine.inspect(model.dir)).info.outputs).toEqual(['splade_weights']);
  });

  it('ignores padding: each text of a batch gets the weights it has alone', async () => {
    const result = await engine.encode({ model: model.dir, items: TEXTS, output_types: ['sparse'] });
    TEXTS.forEach((text, i) => {
      const tokens = text === 'where do cats live?' ? wrap('where', 'do', 'cats', 'live', '?') : wrap(...words(text));
      expectSparse(result.items[i]?.sparse, weights(tokens), JSON.stringify(text));
    });
    const fish = wrap('fish');
    const padded = [...fish, '[PAD]', '[PAD]', '[PAD]', '[PAD]', '[PAD]'];
    expect(maxAbsDiff(weights(padded), weights(padded, (t) => t < fish.length))).toBeGreaterThan(1e-2);
  });

  it('cuts long texts to max_seq_length before pooling', async () => {
    const text = Array.from({ length: 6 }, () => 'the old house by the river').join(' ');
    const kept = wrap(...Array.from({ length: 6 }, () => words('the old house by the river')).flat().slice(0, 22));
    const result = await engine.encode({ model: model.dir, items: [text] });
    expect(result.items[0]?.truncated).toBe(true);
    expectSparse(result.items[0]?.sparse, weights(kept), 'truncated');
  });

  it('scores documents by the sparse dot product with the query', async () => {
    const query = 'where do cats live?';
    const documents = ['cats live in houses', 'the dog runs in the park', 'fish live in the river'];
    const result = await engine.score({ model: model.dir, query, items: documents });
    const q = weights(wrap('where', 'do', 'cats', 'live', '?'));
    const expected = documents.map((d) => dot(q, weights(wrap(...words(d)))));
    const order = expected.map((_, i) => i).sort((a, b) => (expected[b] ?? 0) - (expected[a] ?? 0));
    expect(result.scores.map((s) => s.index)).toEqual(order);
    result.scores.forEach((s) => expect(Math.abs(s.score - (expected[s.index] ?? Number.NaN))).toBeLessThanOrEqual(1e-4));
  });

  it('pools here when the pooled copy of the graph cannot be written (a cache that is not a folder)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'shoal-splade-cache-'));
    const notAFolder = join(dir, 'not-a-folder');
    writeFileSync(notAFolder, '');
    const local = new InferenceEngine({ runtime: { cacheDir: notAFolder } });
    try {
      const result = await local.encode({ model: model.dir, items: TEXTS });
      expect((await local.inspect(model.dir)).info.outputs).toEqual(['logits']);
      TEXTS.forEach((text, i) => {
        const tokens = text === 'where do cats live?' ? wrap('where', 'do', 'cats', 'live', '?') : wrap(...words(text));
        expectSparse(result.items[i]?.sparse, weights(tokens), `fallback ${JSON.stringify(text)}`);
      });
    } finally {
      await local.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('does not offer dense vectors', async () => {
    await expect(engine.encode({ model: model.dir, items: ['fish'], output_types: ['dense'] })).rejects.toMatchObject({ code: 'UNSUPPORTED_OPERATION' });
  });
});
