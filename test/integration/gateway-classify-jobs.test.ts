import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ShoalMetrics } from '../../adapters/observability/metrics.js';
import { ClassifyJobAccepted, ClassifyRequest, ClassifyResult, ClassifyRunStatus, Classification } from '../../adapters/protocol/classify.js';
import type { Engine } from '../../adapters/protocol/engine.js';
import { ErrorCode, ShoalError } from '../../adapters/protocol/errors.js';
import type { InferenceEngine } from '../../pipelines/inference/engine.js';
import { buildGatewayApp } from '../../services/gateway/app.js';
import { ClassifyRuns } from '../../services/gateway/classify-runs.js';
import { MemoryJobs, ScriptedEngine, TEST_SETTINGS } from '../helpers/gateway.js';
import { TINY_MEAN, referenceEngine } from '../helpers/nats-worker.js';

/**
 * POST /v1/classify as a job: above the sync limit (4 here, SHOAL_CLASSIFY_SYNC_ITEMS in
 * production) or with `mode: "job"` the gateway answers 202 and classifies in the background;
 * GET /v1/jobs/:id shows its progress and /results streams one line per product, equal to the
 * synchronous answers for the same products. Resubmission under the same job_id is idempotent,
 * other content under it is 409; the queue is bounded (429) and closing the gateway cancels runs.
 */

const TAXONOMY = '1 - Apparel\n2 - Apparel > Shoes\n3 - Electronics\n4 - Electronics > Phones\n5 - Home\n6 - Home > Kitchen\n7 - Home > Garden';
const SYNC_ITEMS = 4;
const WORDS = ['running shoes', 'a smartphone', 'kitchen knife', 'garden hose', 'leather boots', 'phone charger', 'frying pan', 'cotton shirt', 'lawn mower', 'usb cable'];
const PRODUCTS = Array.from({ length: 30 }, (_, i) => (i % 3 === 0 ? `${WORDS[i % WORDS.length] ?? ''} ${i}` : { id: `p${i}`, text: `${WORDS[i % WORDS.length] ?? ''} model ${i}` }));
const ErrorBody = z.strictObject({ error: z.looseObject({ code: z.string(), message: z.string() }) });
const JobView = ClassifyRunStatus.extend({ links: z.strictObject({ self: z.string(), results: z.string() }) });

describe('POST /v1/classify as a job', () => {
  let engine: InferenceEngine;
  let app: FastifyInstance;
  let resultsDir: string;

  beforeAll(async () => {
    engine = referenceEngine();
    resultsDir = mkdtempSync(join(tmpdir(), 'shoal-classify-jobs-'));
    app = buildGatewayApp(
      { engine, jobs: new MemoryJobs(), models: async () => [], metrics: new ShoalMetrics({ processMetrics: false }), ready: async () => ({ ready: true }) },
      { ...TEST_SETTINGS, classify: { syncItems: SYNC_ITEMS, resultsDir, cacheDir: null } },
    );
    await app.ready();
  });

  afterAll(async () => {
    await app?.close();
    await engine?.close();
    rmSync(resultsDir, { recursive: true, force: true });
  });

  /** Polls the status until the run has finished (the run is in this process: no sleep beyond a few ms per poll). */
  async function finished(jobId: string): Promise<z.infer<typeof JobView>> {
    const deadline = Date.now() + 30_000;
    for (;;) {
      const response = await app.inject({ method: 'GET', url: `/v1/jobs/${jobId}` });
      expect(response.statusCode).toBe(200);
      const status = JobView.parse(response.json());
      if (status.state === 'completed' || status.state === 'failed') return status;
      if (Date.now() > deadline) throw new Error(`job ${jobId} still ${status.state} after 30 s`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }

  async function results(jobId: string): Promise<Classification[]> {
    const response = await app.inject({ method: 'GET', url: `/v1/jobs/${jobId}/results` });
    expect(response.statusCode).toBe(200);
    expect(response.headers['content-type']).toContain('application/x-ndjson');
    return response.body
      .split('\n')
      .filter((line) => line !== '')
      .map((line) => Classification.parse(JSON.parse(line)));
  }

  it('answers 202 above the sync limit, runs to completed, and its results equal the synchronous answers', async () => {
    const payload = { model: TINY_MEAN, items: PRODUCTS, taxonomy: TAXONOMY, top_k: 3 };
    const response = await app.inject({ method: 'POST', url: '/v1/classify', payload });
    expect(response.statusCode).toBe(202);
    const accepted = ClassifyJobAccepted.parse(response.json());
    expect(response.headers.location).toBe(`/v1/jobs/${accepted.job_id}`);
    expect(accepted.status_url).toBe(`/v1/jobs/${accepted.job_id}`);
    expect(accepted.status.items).toBe(30);

    const status = await finished(accepted.job_id);
    expect(status).toMatchObject({ state: 'completed', kind: 'classify', model: TINY_MEAN, items: 30, items_done: 30, categories: 7, error: null });
    const lines = await results(accepted.job_id);
    expect(lines.map((line) => line.id)).toEqual(PRODUCTS.map((product, at) => (typeof product === 'string' ? at : product.id)));

    // The same products, SYNC_ITEMS at a time, answered synchronously (ids given explicitly for the positional ones).
    const sync: Classification[] = [];
    for (let start = 0; start < PRODUCTS.length; start += SYNC_ITEMS) {
      const items = PRODUCTS.slice(start, start + SYNC_ITEMS).map((product, at) => (typeof product === 'string' ? { id: start + at, text: product } : product));
      const answer = await app.inject({ method: 'POST', url: '/v1/classify', payload: { ...payload, items } });
      expect(answer.statusCode).toBe(200);
      sync.push(...ClassifyResult.parse(answer.json()).items);
    }
    expect(lines).toHaveLength(sync.length);
    lines.forEach((line, at) => {
      const expected = sync[at];
      expect(line.id).toBe(expected?.id);
      expect(line.category).toEqual(expected?.category);
      expect(line.alternatives.map((alternative) => alternative.id)).toEqual(expected?.alternatives.map((alternative) => alternative.id));
      expect(line.score).toBeCloseTo(expected?.score ?? Number.NaN, 5);
      expect(line.decided_by).toBe('retrieve');
    });
    // Not every product lands in one category: the comparison covers real choices.
    expect(new Set(lines.map((line) => line.category.id)).size).toBeGreaterThan(1);
  });

  it('is idempotent under a job_id, answers 409 for other content under it, and 404 for an unknown job', async () => {
    const payload = { model: TINY_MEAN, items: PRODUCTS.slice(0, 2), labels: ['shoes', 'phones', 'kitchen'], mode: 'job', job_id: 'classify-idem-1' };
    const first = await app.inject({ method: 'POST', url: '/v1/classify', payload });
    expect(first.statusCode).toBe(202);
    const accepted = ClassifyJobAccepted.parse(first.json());
    expect(accepted.job_id).toBe('classify-idem-1');
    const done = await finished(accepted.job_id);
    expect(done).toMatchObject({ state: 'completed', items: 2, items_done: 2, categories: 3 });

    const again = await app.inject({ method: 'POST', url: '/v1/classify', payload });
    expect(again.statusCode).toBe(202);
    const repeated = ClassifyJobAccepted.parse(again.json());
    // The same run: finished already, created at the same instant (nothing was started again).
    expect(repeated.status).toMatchObject({ state: 'completed', created_at: done.created_at, items_done: 2 });
    expect(await results(accepted.job_id)).toHaveLength(2);

    const conflict = await app.inject({ method: 'POST', url: '/v1/classify', payload: { ...payload, items: PRODUCTS.slice(0, 3) } });
    expect(conflict.statusCode).toBe(409);
    expect(ErrorBody.parse(conflict.json()).error.code).toBe('JOB_CONFLICT');

    const unknown = await app.inject({ method: 'GET', url: '/v1/jobs/no-such-classify-job' });
    expect(unknown.statusCode).toBe(404);
    expect(ErrorBody.parse(unknown.json()).error.code).toBe('NOT_FOUND');
    const unknownResults = await app.inject({ method: 'GET', url: '/v1/jobs/no-such-classify-job/results' });
    expect(unknownResults.statusCode).toBe(404);
  });

  it('honours mode: "job" for a few items, "sync" refuses more than the limit with 413, and a failed run says why', async () => {
    const forced = await app.inject({ method: 'POST', url: '/v1/classify', payload: { model: TINY_MEAN, items: ['a smartphone'], taxonomy: TAXONOMY, mode: 'job' } });
    expect(forced.statusCode).toBe(202);
    const forcedStatus = await finished(ClassifyJobAccepted.parse(forced.json()).job_id);
    expect(forcedStatus).toMatchObject({ state: 'completed', items_done: 1 });

    const tooMany = await app.inject({ method: 'POST', url: '/v1/classify', payload: { model: TINY_MEAN, items: PRODUCTS.slice(0, SYNC_ITEMS + 1), labels: ['a', 'b'], mode: 'sync' } });
    expect(tooMany.statusCode).toBe(413);
    expect(ErrorBody.parse(tooMany.json()).error).toMatchObject({ code: 'INPUT_TOO_LARGE', message: expect.stringContaining('mode "job"') });
    const syncWithId = await app.inject({ method: 'POST', url: '/v1/classify', payload: { model: TINY_MEAN, items: ['x'], labels: ['a'], mode: 'sync', job_id: 'x1' } });
    expect(syncWithId.statusCode).toBe(422);

    // A taxonomy that cannot be read is refused before the 202, as in sync mode.
    const badTaxonomy = await app.inject({ method: 'POST', url: '/v1/classify', payload: { model: TINY_MEAN, items: ['x'], taxonomy: 'A > B\n2 - A > C', mode: 'job' } });
    expect(badTaxonomy.statusCode).toBe(422);
    expect(ErrorBody.parse(badTaxonomy.json()).error.message).toContain('mixes formats');

    const broken = await app.inject({ method: 'POST', url: '/v1/classify', payload: { model: 'no-such-model', items: ['x'], labels: ['a', 'b'], mode: 'job' } });
    expect(broken.statusCode).toBe(202);
    const failed = await finished(ClassifyJobAccepted.parse(broken.json()).job_id);
    expect(failed.state).toBe('failed');
    expect(failed.error?.code).toBe('MODEL_NOT_FOUND');
    expect(failed.items_done).toBe(0);
  });
});

function thrown(work: () => unknown): ShoalError | null {
  try {
    work();
    return null;
  } catch (error) {
    if (error instanceof ShoalError) return error;
    throw error;
  }
}

describe('ClassifyRuns', () => {
  const request = (text: string): ReturnType<typeof ClassifyRequest.parse> => ClassifyRequest.parse({ model: TINY_MEAN, items: [text], labels: ['a', 'b'] });

  it('queues behind the running run, refuses beyond the queue with OVERLOADED, and cancels everything on close', async () => {
    const resultsDir = mkdtempSync(join(tmpdir(), 'shoal-classify-runs-'));
    const runs = new ClassifyRuns({ engine: ScriptedEngine.hanging(), resultsDir, maxRunning: 1, maxQueued: 1 });
    try {
      expect(runs.submit(request('one'), 'r1').state).toBe('running');
      expect(runs.submit(request('two'), 'r2').state).toBe('queued');
      // The first run is waiting on the engine once its results file exists.
      while (!existsSync(join(runs.folder, 'r1.jsonl'))) await new Promise((resolve) => setTimeout(resolve, 5));
      expect(runs.status('r1')?.state).toBe('running');
      expect(runs.status('r2')?.state).toBe('queued');
      const refused = thrown(() => runs.submit(request('three'), 'r3'));
      expect(refused?.code).toBe(ErrorCode.OVERLOADED);
      expect(Number(refused?.details?.retryAfterSeconds)).toBeGreaterThanOrEqual(1);
      expect(runs.status('r3')).toBeNull();
      expect(() => runs.results('r1')).toThrow(/running/);
      expect(readdirSync(resultsDir)).toHaveLength(1);

      await runs.close();
      expect(runs.status('r1')).toMatchObject({ state: 'failed', error: { code: 'CANCELLED' } });
      expect(runs.status('r2')).toMatchObject({ state: 'failed', error: { code: 'CANCELLED' } });
      // The process's results folder is gone; new work is refused.
      expect(readdirSync(resultsDir)).toHaveLength(0);
      expect(() => runs.submit(request('four'), 'r4')).toThrow(/stopping/);
    } finally {
      await runs.close();
      rmSync(resultsDir, { recursive: true, force: true });
    }
  });

  it('waits out a worker that answers OVERLOADED (busy with interactive calls) instead of failing the run', async () => {
    const engine = referenceEngine();
    let refusals = 2;
    const busy: Engine = {
      encode: (call, options) => (refusals-- > 0 ? Promise.reject(new ShoalError(ErrorCode.OVERLOADED, 'worker w1 has 4096 items in flight')) : engine.encode(call, options)),
      score: (call, options) => engine.score(call, options),
      extract: (call, options) => engine.extract(call, options),
      tokenize: (call, options) => engine.tokenize(call, options),
      close: async () => undefined,
    };
    const resultsDir = mkdtempSync(join(tmpdir(), 'shoal-classify-runs-'));
    const runs = new ClassifyRuns({ engine: busy, resultsDir });
    try {
      runs.submit(request('busy'), 'o1');
      const deadline = Date.now() + 30_000;
      while (runs.status('o1')?.state !== 'completed' && runs.status('o1')?.state !== 'failed' && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
      expect(runs.status('o1')).toMatchObject({ state: 'completed', items_done: 1 });
      expect(refusals).toBeLessThan(0);
    } finally {
      await runs.close();
      await engine.close();
      rmSync(resultsDir, { recursive: true, force: true });
    }
  });

  it('keeps the newest finished runs and removes the results files of the ones it forgets', async () => {
    const engine = referenceEngine();
    const resultsDir = mkdtempSync(join(tmpdir(), 'shoal-classify-runs-'));
    const runs = new ClassifyRuns({ engine, resultsDir, keptRuns: 1 });
    try {
      runs.submit(request('first'), 'k1');
      runs.submit(request('second'), 'k2');
      const deadline = Date.now() + 30_000;
      while ((runs.status('k2')?.state !== 'completed' || existsSync(join(runs.folder, 'k1.jsonl'))) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
      expect(runs.status('k2')?.state).toBe('completed');
      expect(runs.status('k1')).toBeNull();
      expect(existsSync(join(runs.folder, 'k1.jsonl'))).toBe(false);
      expect(existsSync(join(runs.folder, 'k2.jsonl'))).toBe(true);
    } finally {
      await runs.close();
      await engine.close();
      rmSync(resultsDir, { recursive: true, force: true });
    }
  });
});
