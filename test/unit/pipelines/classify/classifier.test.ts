import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CallOptions, Engine } from '../../../../adapters/protocol/engine.js';
import { ErrorCode } from '../../../../adapters/protocol/errors.js';
import type { EncodeRequest, ExtractRequest, ScoreRequest, TokenizeRequest } from '../../../../adapters/protocol/requests.js';
import { parseTaxonomy } from '../../../../adapters/taxonomy/index.js';
import { classify, TaxonomyClassifier } from '../../../../pipelines/classify/index.js';
import { InferenceEngine } from '../../../../pipelines/inference/engine.js';
import { FIXTURE_MODELS_DIR, TINY_CROSS, TINY_MEAN, referenceEngine } from '../../../helpers/nats-worker.js';
import { DATA_DIR } from '../../../helpers/shared.js';

/**
 * The classifier on the real in-process engine and the tiny fixture models: the category matrix
 * is embedded once and then read from the cache (the engine sees no category text again), the
 * retrieved categories and scores are the cosine similarities of the engine's own vectors, and a
 * cross-encoder rerank decides with the cross-encoder's own scores.
 */

/** The real engine, counting the texts it is asked to encode. */
class CountingEngine implements Engine {
  encoded: string[] = [];
  constructor(readonly inner: Engine) {}
  encode(request: EncodeRequest, options?: CallOptions) {
    for (const item of request.items) this.encoded.push(typeof item === 'string' ? item : 'text' in item ? item.text : '(image)');
    return this.inner.encode(request, options);
  }
  score(request: ScoreRequest, options?: CallOptions) {
    return this.inner.score(request, options);
  }
  extract(request: ExtractRequest, options?: CallOptions) {
    return this.inner.extract(request, options);
  }
  tokenize(request: TokenizeRequest, options?: CallOptions) {
    return this.inner.tokenize(request, options);
  }
  close() {
    return this.inner.close();
  }
}

const TAXONOMY = [
  '1 - Apparel',
  '2 - Apparel > Shirts',
  '3 - Apparel > Shoes',
  '4 - Apparel > Shoes > Running Shoes',
  '5 - Electronics',
  '6 - Electronics > Phones',
  '7 - Electronics > Laptops',
  '8 - Home',
  '9 - Home > Kitchen',
  '10 - Home > Kitchen > Knives',
].join('\n');
const PRODUCTS = ['a red cotton shirt', 'trail running shoes, size 44', 'a 14 inch laptop with 16 GB memory', 'chef knife, stainless steel'];

function cosine(a: readonly number[], b: readonly number[]): number {
  let dot = 0;
  let na = 0;
  let nb = 0;
  a.forEach((x, i) => {
    const y = b[i] ?? 0;
    dot += x * y;
    na += x * x;
    nb += y * y;
  });
  return dot / Math.sqrt(na * nb);
}

describe('TaxonomyClassifier', () => {
  let engine: InferenceEngine;
  const cacheDir = mkdtempSync(join(tmpdir(), 'shoal-classify-unit-'));

  beforeAll(() => {
    engine = referenceEngine();
  });

  afterAll(async () => {
    await engine?.close();
    rmSync(cacheDir, { recursive: true, force: true });
  });

  it('a model replaced under the same name does not reuse the cached categories of the old one', async () => {
    const taxonomy = parseTaxonomy(TAXONOMY);
    let behind = TINY_MEAN;
    // One model name, its weights swapped between the runs (a fine-tuned model copied over the old folder).
    const renamed: Engine = {
      encode: (request, options) => engine.encode({ ...request, model: behind }, options).then((result) => ({ ...result, model: 'shop-encoder' })),
      score: (request, options) => engine.score(request, options),
      extract: (request, options) => engine.extract(request, options),
      tokenize: (request, options) => engine.tokenize(request, options),
      close: async () => undefined,
    };
    const folder = mkdtempSync(join(tmpdir(), 'shoal-classify-swap-'));
    try {
      const open = (): Promise<TaxonomyClassifier> => TaxonomyClassifier.open(renamed, taxonomy, { model: 'shop-encoder', cacheDir: folder });
      const first = await open();
      await first.close();
      const again = await open();
      expect(again.categoryStats.built).toBe(false);
      await again.close();
      behind = 'tiny-roberta-mean';
      const swapped = await open();
      expect(swapped.categoryStats.built).toBe(true);
      await swapped.close();
    } finally {
      rmSync(folder, { recursive: true, force: true });
    }
  });

  it('embeds the categories once, then reads them from the cache; retrieval is the cosine of the engine vectors', async () => {
    const taxonomy = parseTaxonomy(TAXONOMY);
    const counting = new CountingEngine(engine);
    const first = await TaxonomyClassifier.open(counting, taxonomy, { model: TINY_MEAN, topK: 3, cacheDir });
    expect(first.categoryStats).toMatchObject({ built: true, categories: 10 });
    // One probe text first (its vector fingerprints the model's weights for the cache key), then the categories.
    expect(counting.encoded.slice(1)).toEqual(taxonomy.categories.map((c) => c.pathText));
    const probe = counting.encoded[0];
    await first.close();
    expect(readdirSync(join(cacheDir, 'classify')).sort()).toEqual([expect.stringMatching(/^[0-9a-f]{64}\.f32$/), expect.stringMatching(/^[0-9a-f]{64}\.json$/)]);

    counting.encoded = [];
    const second = await TaxonomyClassifier.open(counting, taxonomy, { model: TINY_MEAN, topK: 3, cacheDir });
    expect(second.categoryStats.built).toBe(false);
    expect(counting.encoded).toEqual([probe]);
    counting.encoded = [];
    try {
      const results = await second.classify(PRODUCTS.map((text, i) => ({ id: `p${i}`, text })));
      expect(counting.encoded).toEqual(PRODUCTS);
      const products = await engine.encode({ model: TINY_MEAN, items: PRODUCTS, role: 'query' });
      const categories = await engine.encode({ model: TINY_MEAN, items: taxonomy.categories.map((c) => c.pathText), role: 'document' });
      results.forEach((result, i) => {
        const expected = taxonomy.categories
          .map((category, c) => ({ id: category.id, path: category.pathText, score: cosine(products.items[i]?.dense ?? [], categories.items[c]?.dense ?? []) }))
          .sort((a, b) => b.score - a.score);
        expect(result.id).toBe(`p${i}`);
        expect(result.category).toEqual({ id: expected[0]?.id, path: expected[0]?.path });
        expect(result.score).toBeCloseTo(expected[0]?.score ?? Number.NaN, 5);
        expect(result.alternatives.map((a) => a.id)).toEqual(expected.slice(1, 3).map((e) => e.id));
        expect(result.decided_by).toBe('retrieve');
        expect(result.needs_review).toBe(result.score < 0.5);
      });
    } finally {
      await second.close();
    }
  });

  it('classify(): labels or taxonomy text, a cross-encoder rerank decides with its own scores, a threshold marks review', async () => {
    const labels = ['sports', 'politics', 'cooking', 'technology'];
    const result = await classify(engine, { model: TINY_MEAN, items: ['a new phone chip', { id: 'x', text: 'how to bake bread' }], labels, top_k: 2, rerank: { model: TINY_CROSS, top: 4 }, threshold: 1e6 });
    expect(result.categories).toBe(4);
    expect(result.items.map((item) => item.id)).toEqual([0, 'x']);
    for (const [i, item] of result.items.entries()) {
      const text = i === 0 ? 'a new phone chip' : 'how to bake bread';
      const scored = await engine.score({ model: TINY_CROSS, query: text, items: [...labels].sort() });
      const best = scored.scores[0];
      expect(item.decided_by).toBe('rerank');
      expect(item.category.id).toBe([...labels].sort()[best?.index ?? -1]);
      expect(item.score).toBeCloseTo(best?.score ?? Number.NaN, 5);
      expect(item.alternatives).toHaveLength(1);
      expect(item.needs_review).toBe(true);
    }
    await expect(classify(engine, { model: TINY_MEAN, items: ['x'], labels, taxonomy: 'A' })).rejects.toMatchObject({ code: ErrorCode.INVALID_INPUT });
    const fromText = await classify(engine, { model: TINY_MEAN, items: ['running shoes'], taxonomy: TAXONOMY, max_depth: 1, hierarchy: true });
    expect(['Apparel', 'Electronics', 'Home']).toContain(fromText.items[0]?.category.path);
  });

  it('fuses the CLIP image similarity into the candidates: (1 − w)·text + w·image, products without an image keep the text score', async () => {
    const images = join(DATA_DIR, 'images');
    const clipEngine = new InferenceEngine({ sources: { modelDirs: [FIXTURE_MODELS_DIR], allowDownload: false }, runtime: { intraOpThreads: 1 }, memoryBudget: '1GiB', images: { roots: [images] } });
    try {
      const taxonomy = parseTaxonomy(TAXONOMY);
      const weight = 0.4;
      const classifier = await TaxonomyClassifier.open(clipEngine, taxonomy, { model: TINY_MEAN, imageModel: 'tiny-clip', imageWeight: weight, topK: 10, candidates: 10 });
      try {
        const photo = join(images, 'n02992529_cellular_telephone.JPEG');
        const [withImage, without] = await classifier.classify([
          { id: 'img', text: 'a phone', image: photo },
          { id: 'txt', text: 'a phone' },
        ]);
        const text = await clipEngine.encode({ model: TINY_MEAN, items: ['a phone'], role: 'query' });
        const cats = await clipEngine.encode({ model: TINY_MEAN, items: taxonomy.categories.map((c) => c.pathText), role: 'document' });
        const image = await clipEngine.encode({ model: 'tiny-clip', items: [{ image: photo }], role: 'query' });
        const clipCats = await clipEngine.encode({ model: 'tiny-clip', items: taxonomy.categories.map((c) => c.pathText), role: 'document' });
        const fused = taxonomy.categories
          .map((category, c) => ({
            id: category.id,
            text: cosine(text.items[0]?.dense ?? [], cats.items[c]?.dense ?? []),
            score: (1 - weight) * cosine(text.items[0]?.dense ?? [], cats.items[c]?.dense ?? []) + weight * cosine(image.items[0]?.dense ?? [], clipCats.items[c]?.dense ?? []),
          }));
        const byFused = [...fused].sort((a, b) => b.score - a.score);
        const byText = [...fused].sort((a, b) => b.text - a.text);
        expect(withImage?.category.id).toBe(byFused[0]?.id);
        expect(withImage?.score).toBeCloseTo(byFused[0]?.score ?? Number.NaN, 5);
        expect(withImage?.alternatives.map((a) => a.id)).toEqual(byFused.slice(1).map((f) => f.id));
        expect(without?.category.id).toBe(byText[0]?.id);
        expect(without?.score).toBeCloseTo(byText[0]?.text ?? Number.NaN, 5);
      } finally {
        await classifier.close();
      }
    } finally {
      await clipEngine.close();
    }
  });
});
