import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { NatsConnection } from '@nats-io/transport-node';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { JobsClient } from '../../adapters/nats/jobs/jobs-client.js';
import { ShoalMetrics } from '../../adapters/observability/metrics.js';
import { ClassifyJobAccepted, ClassifyResult, ClassifyRunStatus, Classification } from '../../adapters/protocol/classify.js';
import type { InferenceEngine } from '../../pipelines/inference/engine.js';
import { buildGatewayApp } from '../../services/gateway/app.js';
import { ClassifyJobRuns } from '../../services/gateway/classify-jobs.js';
import type { ShoalWorker } from '../../services/worker/worker.js';
import { ErrorBody, TEST_SETTINGS } from '../helpers/gateway.js';
import { eventually, natsServerAvailable, NATS_SERVER_MISSING, startNatsServer, type NatsServerHandle } from '../helpers/nats-server.js';
import { TINY_MEAN, referenceEngine, startTestWorker, testConnection } from '../helpers/nats-worker.js';

/**
 * POST /v1/classify with SHOAL_CLASSIFY_JOBS (issue 35, item 5): the gateway publishes the run as
 * classification jobs and keeps nothing of it. The gateway that took the run is closed right
 * after its 202; a second replica (its own connection) answers GET /v1/jobs/:id until the classify
 * worker completed the run, and streams the results: the synchronous answers for the same
 * products, in order. The same id and content answers the same run, other content is 409; a
 * `file://` result target inside the file roots is written there and read back; one outside them
 * is refused (422) before anything is published.
 */

const TAXONOMY = '1 - Apparel\n2 - Apparel > Shoes\n3 - Electronics\n4 - Electronics > Phones\n5 - Home\n6 - Home > Kitchen\n7 - Home > Garden';
const WORDS = ['running shoes', 'a smartphone', 'kitchen knife', 'garden hose', 'leather boots', 'phone charger', 'frying pan', 'cotton shirt', 'lawn mower', 'usb cable'];
const PRODUCTS = Array.from({ length: 600 }, (_, i) => (i % 3 === 0 ? `${WORDS[i % WORDS.length] ?? ''} ${i}` : { id: `p${i}`, text: `${WORDS[i % WORDS.length] ?? ''} model ${i}` }));
const JobView = ClassifyRunStatus.extend({ links: z.strictObject({ self: z.string(), results: z.string() }) });

describe.skipIf(!natsServerAvailable())('gateway: POST /v1/classify as classification jobs', () => {
  let root: string;
  let files: string;
  let server: NatsServerHandle;
  const workers: ShoalWorker[] = [];
  const gateways: { app: FastifyInstance; classifyJobs: ClassifyJobRuns; nc: NatsConnection; engine: InferenceEngine }[] = [];

  async function gateway(): Promise<FastifyInstance> {
    const nc = await testConnection(server.url);
    const jobs = await JobsClient.open(nc, { topology: { prefix: 'shoal' } });
    const classifyJobs = new ClassifyJobRuns({ connection: () => nc, prefix: 'shoal', s3: {}, fileRoots: [files] });
    const engine = referenceEngine();
    const app = buildGatewayApp(
      { engine, jobs, classifyJobs, models: async () => [], metrics: new ShoalMetrics({ processMetrics: false }), ready: async () => ({ ready: true }) },
      { ...TEST_SETTINGS, bodyLimitBytes: 1024 * 1024, natsPrefix: 'shoal', classifyJobs: true, classify: { syncItems: 256, resultsDir: join(root, 'in-gateway'), cacheDir: null } },
    );
    gateways.push({ app, classifyJobs, nc, engine });
    return app;
  }

  async function finished(app: FastifyInstance, id: string): Promise<z.infer<typeof JobView>> {
    let final: z.infer<typeof JobView> | null = null;
    await eventually(async () => {
      const status = await app.inject({ method: 'GET', url: `/v1/jobs/${id}` });
      expect(status.statusCode, status.body).toBe(200);
      final = JobView.parse(status.json());
      expect(['completed', 'failed']).toContain(final.state);
    }, 90_000);
    if (final === null) throw new Error('no status');
    return final;
  }

  async function results(app: FastifyInstance, id: string): Promise<Classification[]> {
    const response = await app.inject({ method: 'GET', url: `/v1/jobs/${id}/results` });
    expect(response.statusCode, response.body).toBe(200);
    expect(response.headers['content-type']).toContain('application/x-ndjson');
    return response.body
      .split('\n')
      .filter((line) => line !== '')
      .map((line) => Classification.parse(JSON.parse(line)));
  }

  beforeAll(async () => {
    root = mkdtempSync(join(tmpdir(), 'shoal-gw-clsjobs-'));
    files = join(root, 'files');
    mkdirSync(files);
    server = await startNatsServer();
    workers.push(await startTestWorker(server.url, 'shoal', { concurrency: 8 }));
    workers.push(await startTestWorker(server.url, 'shoal', { models: [], classify: true, fileRoots: [files], consumer: { ackWaitMs: 10_000, maxDeliver: 5 } }));
  }, 120_000);

  afterAll(async () => {
    for (const { app, classifyJobs, nc, engine } of gateways) {
      await app.close().catch(() => undefined);
      await classifyJobs.close().catch(() => undefined);
      await engine.close().catch(() => undefined);
      await nc.close().catch(() => undefined);
    }
    await Promise.all(workers.map((worker) => worker.close().catch(() => undefined)));
    await server?.stop();
    rmSync(root, { recursive: true, force: true });
  }, 60_000);

  it(natsServerAvailable() ? 'publishes the run, survives the gateway closing after the 202, and another replica answers status and results' : NATS_SERVER_MISSING, async () => {
    const first = await gateway();
    const payload = { model: TINY_MEAN, items: PRODUCTS, taxonomy: TAXONOMY, top_k: 3, job_id: 'gw-cls-1' };
    const posted = await first.inject({ method: 'POST', url: '/v1/classify', payload });
    expect(posted.statusCode, posted.body).toBe(202);
    const accepted = ClassifyJobAccepted.parse(posted.json());
    expect(posted.headers.location).toBe('/v1/jobs/gw-cls-1');
    expect(accepted.status).toMatchObject({ state: 'queued', items: 600, result: 'obj://shoal_payloads/classify/gw-cls-1/results.jsonl' });
    // The replica that took the run goes away at once: nothing of the run lived in it.
    const taken = gateways[0];
    await taken?.app.close();
    await taken?.classifyJobs.close();
    await taken?.nc.close();

    const second = await gateway();
    const status = await finished(second, 'gw-cls-1');
    expect(status).toMatchObject({ state: 'completed', kind: 'classify', model: TINY_MEAN, items: 600, items_done: 600, chunks: 3, chunks_done: 3, categories: 7, error: null });
    const lines = await results(second, 'gw-cls-1');
    expect(lines.map((line) => line.id)).toEqual(PRODUCTS.map((product, at) => (typeof product === 'string' ? at : product.id)));

    // The synchronous answers for the same products (positional ids given explicitly).
    const sync: Classification[] = [];
    for (let start = 0; start < PRODUCTS.length; start += 200) {
      const items = PRODUCTS.slice(start, start + 200).map((product, at) => (typeof product === 'string' ? { id: start + at, text: product } : product));
      const answer = await second.inject({ method: 'POST', url: '/v1/classify', payload: { model: TINY_MEAN, items, taxonomy: TAXONOMY, top_k: 3 } });
      expect(answer.statusCode, answer.body).toBe(200);
      sync.push(...ClassifyResult.parse(answer.json()).items);
    }
    lines.forEach((line, at) => {
      expect(line.category).toEqual(sync[at]?.category);
      expect(line.score).toBeCloseTo(sync[at]?.score ?? Number.NaN, 5);
    });

    // The same id and content: the same run, nothing published again; other content: 409.
    const again = await second.inject({ method: 'POST', url: '/v1/classify', payload });
    expect(again.statusCode).toBe(202);
    expect(ClassifyJobAccepted.parse(again.json()).status).toMatchObject({ state: 'completed', created_at: status.created_at });
    const other = await second.inject({ method: 'POST', url: '/v1/classify', payload: { ...payload, items: PRODUCTS.slice(0, 5) } });
    expect(other.statusCode).toBe(409);
    expect(ErrorBody.parse(other.json()).error.code).toBe('JOB_CONFLICT');
  }, 180_000);

  it(natsServerAvailable() ? 'writes a file:// result target inside the roots and reads it back; refuses one outside them' : NATS_SERVER_MISSING, async () => {
    const app = gateways.at(-1)?.app ?? (await gateway());
    const target = pathToFileURL(join(files, 'out', 'classified.jsonl')).href;
    const posted = await app.inject({ method: 'POST', url: '/v1/classify', payload: { model: TINY_MEAN, labels: ['shoes', 'phones', 'kitchen'], items: PRODUCTS.slice(0, 20), mode: 'job', result: target } });
    expect(posted.statusCode, posted.body).toBe(202);
    const id = ClassifyJobAccepted.parse(posted.json()).job_id;
    expect(await finished(app, id)).toMatchObject({ state: 'completed', items_done: 20, result: target });
    const lines = await results(app, id);
    expect(lines).toHaveLength(20);
    expect(readFileSync(join(files, 'out', 'classified.jsonl'), 'utf8').trim().split('\n')).toHaveLength(20);

    const outside = await app.inject({ method: 'POST', url: '/v1/classify', payload: { model: TINY_MEAN, labels: ['a', 'b'], items: ['x'], mode: 'job', result: pathToFileURL(join(root, 'elsewhere.jsonl')).href } });
    expect(outside.statusCode).toBe(422);
    expect(ErrorBody.parse(outside.json()).error.message).toContain('outside the allowed file roots');
    const bareBucket = await app.inject({ method: 'POST', url: '/v1/classify', payload: { model: TINY_MEAN, labels: ['a', 'b'], items: ['x'], mode: 'job', result: 'obj://shoal_payloads' } });
    expect(bareBucket.statusCode).toBe(422);
    expect(ErrorBody.parse(bareBucket.json()).error.message).toContain('a result target names one object');
    const syncTarget = await app.inject({ method: 'POST', url: '/v1/classify', payload: { model: TINY_MEAN, labels: ['a', 'b'], items: ['x'], mode: 'sync', result: target } });
    expect(syncTarget.statusCode).toBe(422);
  }, 120_000);
});
