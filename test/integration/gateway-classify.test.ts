import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ShoalMetrics } from '../../adapters/observability/metrics.js';
import { ClassifyResult } from '../../adapters/protocol/classify.js';
import type { CallOptions, Engine } from '../../adapters/protocol/engine.js';
import type { EncodeRequest } from '../../adapters/protocol/requests.js';
import type { InferenceEngine } from '../../pipelines/inference/engine.js';
import { buildGatewayApp } from '../../services/gateway/app.js';
import { MAX_SYNC_CLASSIFY_ITEMS } from '../../services/gateway/routes/classify.js';
import { MemoryJobs, TEST_SETTINGS } from '../helpers/gateway.js';
import { TINY_MEAN, referenceEngine } from '../helpers/nats-worker.js';

/**
 * POST /v1/classify on the in-process engine: a taxonomy given inline, products classified
 * synchronously, the category matrix kept for the next request with the same taxonomy, bounded
 * bodies refused with their codes (413 above the sync limit in mode "sync", 422 for a malformed
 * request). The job form is in gateway-classify-jobs.test.ts.
 */

const TAXONOMY = '1 - Apparel\n2 - Apparel > Shoes\n3 - Electronics\n4 - Electronics > Phones\n5 - Home\n6 - Home > Kitchen';
const ErrorBody = z.strictObject({ error: z.looseObject({ code: z.string(), message: z.string() }) });

describe('POST /v1/classify', () => {
  let engine: InferenceEngine;
  let app: FastifyInstance;
  const encoded: number[] = [];
  /** Category builds (encode calls of this many texts) wait this long, so a test can leave during one. */
  const slowBuild = { items: -1, ms: 0 };

  beforeAll(async () => {
    engine = referenceEngine();
    // The real engine, recording how many texts each encode call carries.
    const counting: Engine = {
      encode: async (request: EncodeRequest, options?: CallOptions) => {
        encoded.push(request.items.length);
        if (request.items.length === slowBuild.items) await new Promise((resolve) => setTimeout(resolve, slowBuild.ms));
        return engine.encode(request, options);
      },
      score: (request, options) => engine.score(request, options),
      extract: (request, options) => engine.extract(request, options),
      tokenize: (request, options) => engine.tokenize(request, options),
      close: () => engine.close(),
    };
    app = buildGatewayApp(
      { engine: counting, jobs: new MemoryJobs(), models: async () => [], metrics: new ShoalMetrics({ processMetrics: false }), ready: async () => ({ ready: true }) },
      { ...TEST_SETTINGS },
    );
    await app.ready();
  });

  afterAll(async () => {
    await app?.close();
    await engine?.close();
  });

  it('classifies a few products into an inline taxonomy; the second request embeds only its products', async () => {
    const payload = { model: TINY_MEAN, items: [{ id: 'a', text: 'running shoes' }, 'a smartphone'], taxonomy: TAXONOMY, top_k: 2 };
    const first = await app.inject({ method: 'POST', url: '/v1/classify', payload });
    expect(first.statusCode).toBe(200);
    const body = ClassifyResult.parse(first.json());
    expect(body.categories).toBe(6);
    expect(body.items.map((item) => item.id)).toEqual(['a', 1]);
    for (const item of body.items) {
      expect(['1', '2', '3', '4', '5', '6']).toContain(item.category.id);
      expect(item.alternatives).toHaveLength(1);
      expect(item.decided_by).toBe('retrieve');
    }
    expect(encoded).toEqual([6, 2]);
    const second = await app.inject({ method: 'POST', url: '/v1/classify', payload });
    expect(second.statusCode).toBe(200);
    expect(ClassifyResult.parse(second.json())).toEqual(body);
    expect(encoded).toEqual([6, 2, 2]);
  });

  it('refuses more items than the sync limit with 413 INPUT_TOO_LARGE in mode "sync", and a malformed request with 422', async () => {
    const many = await app.inject({ method: 'POST', url: '/v1/classify', payload: { model: TINY_MEAN, items: Array.from({ length: MAX_SYNC_CLASSIFY_ITEMS + 1 }, (_, i) => `p${i}`), labels: ['a', 'b'], mode: 'sync' } });
    expect(many.statusCode).toBe(413);
    expect(ErrorBody.parse(many.json()).error).toMatchObject({ code: 'INPUT_TOO_LARGE', message: expect.stringContaining('mode "job"') });
    const both = await app.inject({ method: 'POST', url: '/v1/classify', payload: { model: TINY_MEAN, items: ['x'], labels: ['a'], taxonomy: 'A' } });
    expect(both.statusCode).toBe(422);
    expect(ErrorBody.parse(both.json()).error.code).toBe('INVALID_INPUT');
    const topK = await app.inject({ method: 'POST', url: '/v1/classify', payload: { model: TINY_MEAN, items: ['x'], labels: ['a'], top_k: 1000 } });
    expect(topK.statusCode).toBe(422);
  });

  it('keeps one category matrix per taxonomy and model: top_k, threshold, candidates and hierarchy are applied per request', async () => {
    const taxonomy = '1 - Toys\n2 - Toys > Dolls\n3 - Garden\n4 - Garden > Tools';
    const base = { model: TINY_MEAN, items: ['a rag doll'], taxonomy };
    encoded.length = 0;
    const first = await app.inject({ method: 'POST', url: '/v1/classify', payload: { ...base, top_k: 2 } });
    expect(first.statusCode).toBe(200);
    expect(encoded).toEqual([4, 1]);
    const wider = await app.inject({ method: 'POST', url: '/v1/classify', payload: { ...base, top_k: 4, threshold: 0.99, candidates: 4, hierarchy: true } });
    expect(wider.statusCode).toBe(200);
    // Only the product is embedded again; the answer follows the new options.
    expect(encoded).toEqual([4, 1, 1]);
    const item = ClassifyResult.parse(wider.json()).items[0];
    expect(item?.alternatives).toHaveLength(3);
    expect(item?.needs_review).toBe(true);
    expect(ClassifyResult.parse(first.json()).items[0]?.alternatives).toHaveLength(1);
    // What the matrix is built from does make another one: the category template.
    await app.inject({ method: 'POST', url: '/v1/classify', payload: { ...base, category_template: 'products: {path}' } });
    expect(encoded).toEqual([4, 1, 1, 4, 1]);
  });

  it('refuses blank product texts and blank labels (422), and keeps a label holding " > " as one flat category', async () => {
    for (const items of [[''], ['ok', { text: '   ' }]]) {
      const blank = await app.inject({ method: 'POST', url: '/v1/classify', payload: { model: TINY_MEAN, items, labels: ['a', 'b'] } });
      expect(blank.statusCode, JSON.stringify(items)).toBe(422);
      expect(ErrorBody.parse(blank.json()).error.message).toContain('blank');
    }
    const blankLabel = await app.inject({ method: 'POST', url: '/v1/classify', payload: { model: TINY_MEAN, items: ['x'], labels: ['a', '  '] } });
    expect(blankLabel.statusCode).toBe(422);
    expect(ErrorBody.parse(blankLabel.json()).error.message).toContain('blank');
    const pathLike = await app.inject({ method: 'POST', url: '/v1/classify', payload: { model: TINY_MEAN, items: ['boots'], labels: ['Shoes > Boots', 'Phones'], top_k: 5 } });
    expect(pathLike.statusCode).toBe(200);
    const answer = ClassifyResult.parse(pathLike.json());
    expect(answer.categories).toBe(2);
    const named = [answer.items[0]?.category.path, ...(answer.items[0]?.alternatives.map((a) => a.path) ?? [])].sort();
    expect(named).toEqual(['Phones', 'Shoes > Boots']);
  });

  it('a client that leaves during a shared category build does not cancel it for the others', async () => {
    const taxonomy = '1 - Boats\n2 - Boats > Sails\n3 - Bikes';
    slowBuild.items = 3;
    slowBuild.ms = 600;
    const url = await app.listen({ port: 0, host: '127.0.0.1' });
    try {
      const body = JSON.stringify({ model: TINY_MEAN, items: ['a sail'], taxonomy });
      const leaving = new AbortController();
      const first = fetch(`${url}/v1/classify`, { method: 'POST', headers: { 'content-type': 'application/json' }, body, signal: leaving.signal }).catch((error: unknown) => error);
      await new Promise((resolve) => setTimeout(resolve, 100));
      const second = fetch(`${url}/v1/classify`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
      await new Promise((resolve) => setTimeout(resolve, 100));
      leaving.abort();
      expect(await first).toBeInstanceOf(Error);
      const answer = await second;
      expect(answer.status).toBe(200);
      expect(ClassifyResult.parse(await answer.json()).categories).toBe(3);
    } finally {
      slowBuild.items = -1;
    }
  });
});
