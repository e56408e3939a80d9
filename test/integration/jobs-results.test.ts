import { mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ShoalMetrics } from '../../adapters/observability/metrics.js';
import { resolveGatewayConfig } from '../../services/gateway/config.js';
import { startGateway, type GatewayHandle } from '../../services/gateway/main.js';
import type { ShoalWorker } from '../../services/worker/worker.js';
import type { InferenceEngine } from '../../pipelines/inference/engine.js';
import { expectAllClose } from '../helpers/conformance.js';
import { NATS_SERVER_MISSING, natsServerAvailable, startNatsServer, type NatsServerHandle } from '../helpers/nats-server.js';
import { TINY_CROSS, TINY_MEAN, quietLogger, referenceEngine, startTestWorker, uniquePrefix } from '../helpers/nats-worker.js';

/**
 * Jobs over HTTP as a client without NATS uses them: submit, poll the public status (no internal
 * bookkeeping in it), then GET /v1/jobs/:id/results — JSON Lines in item order with the packed
 * vectors decoded — for stream and file:// store targets, against a private nats-server, a real
 * worker and the gateway. File targets outside SHOAL_FILE_ROOTS are refused at submit.
 */

const TEXTS = ['a dog', 'a cat', 'the harbour pilot', 'a boat in the water', 'fish market'];
const ErrorBody = z.strictObject({ error: z.looseObject({ code: z.string(), message: z.string() }) });
const Submitted = z.looseObject({ job_id: z.string(), status: z.record(z.string(), z.unknown()), links: z.looseObject({ results: z.string() }) });
const Status = z.looseObject({ state: z.string(), parts: z.number(), parts_done: z.number() });
const DenseLine = z.strictObject({ index: z.number(), id: z.union([z.string(), z.number()]).optional(), dense: z.array(z.number()) });
const ScoreLine = z.strictObject({ index: z.number(), score: z.number() });

function post(base: string, path: string, body: unknown): Promise<Response> {
  return fetch(`${base}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
}

async function finished(base: string, jobId: string): Promise<z.infer<typeof Status>> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const status = Status.parse(await (await fetch(`${base}/v1/jobs/${jobId}`)).json());
    if (['completed', 'failed', 'partial'].includes(status.state) || Date.now() > deadline) return status;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

function lines(text: string): unknown[] {
  return text.split('\n').filter((line) => line !== '').map((line) => JSON.parse(line) as unknown);
}

describe.skipIf(!natsServerAvailable())(`GET /v1/jobs/:id/results ${natsServerAvailable() ? '' : NATS_SERVER_MISSING}`, () => {
  let server: NatsServerHandle;
  let worker: ShoalWorker;
  let gateway: GatewayHandle;
  let reference: InferenceEngine;
  const prefix = uniquePrefix('jobres');
  const roots = mkdtempSync(join(tmpdir(), 'shoal-job-results-'));

  beforeAll(async () => {
    server = await startNatsServer();
    worker = await startTestWorker(server.url, prefix, { models: [TINY_MEAN, TINY_CROSS, 'tiny-gliner'], fileRoots: [roots] });
    const config = resolveGatewayConfig({ host: '127.0.0.1', port: '0', natsUrl: server.url, natsPrefix: prefix }, { SHOAL_FILE_ROOTS: roots });
    gateway = await startGateway({ config, logger: quietLogger(), metrics: new ShoalMetrics({ processMetrics: false }) });
    reference = referenceEngine();
  }, 120_000);

  afterAll(async () => {
    await gateway?.close();
    await worker?.drain();
    await server?.stop();
    await reference?.close();
    rmSync(roots, { recursive: true, force: true });
  });

  it('streams an encode job as JSON Lines in item order, packed vectors decoded, with a public status', async () => {
    const items = TEXTS.map((text, i) => (i % 2 === 0 ? { id: `d${i}`, text } : text));
    const response = await post(gateway.url, '/v1/jobs', { primitive: 'encode', request: { model: TINY_MEAN, items }, part_items: 2 });
    expect(response.status).toBe(202);
    const submitted = Submitted.parse(await response.json());
    expect(submitted.links.results).toBe(`/v1/jobs/${submitted.job_id}/results`);
    for (const internal of ['counted_parts', 'content_hash', 'submitted']) expect(submitted.status).not.toHaveProperty(internal);

    const status = await finished(gateway.url, submitted.job_id);
    expect(status).toMatchObject({ state: 'completed', parts: 3, parts_done: 3 });
    const raw = (await (await fetch(`${gateway.url}/v1/jobs/${submitted.job_id}`)).json()) as Record<string, unknown>;
    for (const internal of ['counted_parts', 'content_hash', 'submitted']) expect(raw).not.toHaveProperty(internal);

    const results = await fetch(`${gateway.url}${submitted.links.results}`);
    expect(results.status, await results.clone().text()).toBe(200);
    expect(results.headers.get('content-type')).toMatch(/^application\/x-ndjson/);
    const rows = lines(await results.text()).map((line) => DenseLine.parse(line));
    expect(rows.map((row) => [row.index, row.id ?? null])).toEqual([[0, 'd0'], [1, null], [2, 'd2'], [3, null], [4, 'd4']]);
    const expected = await reference.encode({ model: TINY_MEAN, items: TEXTS });
    // float32 on the wire: equal to the in-process float64 values to float32 precision.
    rows.forEach((row, i) => expectAllClose(row.dense, expected.items[i]?.dense ?? [], 1e-6, `item ${i}`));
  });

  it('streams a score job one line per item in item order', async () => {
    const response = await post(gateway.url, '/v1/jobs', { primitive: 'score', request: { model: TINY_CROSS, query: 'where do fish live', items: TEXTS }, part_items: 2 });
    const { job_id: jobId } = Submitted.parse(await response.json());
    expect((await finished(gateway.url, jobId)).state).toBe('completed');
    const rows = lines(await (await fetch(`${gateway.url}/v1/jobs/${jobId}/results`)).text()).map((line) => ScoreLine.parse(line));
    const expected = await reference.score({ model: TINY_CROSS, query: 'where do fish live', items: TEXTS });
    expect(rows.map((row) => row.index)).toEqual([0, 1, 2, 3, 4]);
    for (const row of rows) expect(row.score).toBeCloseTo(expected.scores.find((s) => s.index === row.index)?.score ?? Number.NaN, 5);
  });

  it('reads file:// store results back; refuses file:// targets outside SHOAL_FILE_ROOTS at submit', async () => {
    const inside = pathToFileURL(join(roots, 'out')).href;
    const response = await post(gateway.url, '/v1/jobs', { primitive: 'encode', request: { model: TINY_MEAN, items: TEXTS.slice(0, 3) }, part_items: 2, result: { kind: 'store', uri: inside } });
    expect(response.status).toBe(202);
    const { job_id: jobId } = Submitted.parse(await response.json());
    expect((await finished(gateway.url, jobId)).state).toBe('completed');
    const rows = lines(await (await fetch(`${gateway.url}/v1/jobs/${jobId}/results`)).text()).map((line) => DenseLine.parse(line));
    expect(rows.map((row) => row.index)).toEqual([0, 1, 2]);
    const expected = await reference.encode({ model: TINY_MEAN, items: TEXTS.slice(0, 3) });
    rows.forEach((row, i) => expectAllClose(row.dense, expected.items[i]?.dense ?? [], 1e-6, `stored item ${i}`));

    const outside = await post(gateway.url, '/v1/jobs', { primitive: 'encode', request: { model: TINY_MEAN, items: ['x'] }, result: { kind: 'store', uri: 'file:///etc/shoal-out' } });
    expect(outside.status).toBe(422);
    const body = ErrorBody.parse(await outside.json());
    expect(body.error.code).toBe('INVALID_INPUT');
    expect(body.error.message).toContain('outside the allowed file roots');
    expect(body.error.message).toContain('SHOAL_FILE_ROOTS');
  });

  it('refuses a file:// target that leads out of the roots through a link, writing nothing outside (worker check, links resolved)', async () => {
    // A link inside the root to a folder outside it: the job's own folder under it does not exist
    // yet, so the check must resolve the nearest folder that does, not give up on the missing one.
    const outsideDir = mkdtempSync(join(tmpdir(), 'shoal-job-results-outside-'));
    try {
      symlinkSync(outsideDir, join(roots, 'escape'));
      mkdirSync(join(outsideDir, 'existing'));
      for (const uri of [pathToFileURL(join(roots, 'escape')).href, pathToFileURL(join(roots, 'escape', 'new', 'deeper')).href, pathToFileURL(join(roots, 'escape', 'existing')).href]) {
        const response = await post(gateway.url, '/v1/jobs', { primitive: 'encode', request: { model: TINY_MEAN, items: ['x'] }, result: { kind: 'store', uri } });
        expect(response.status, uri).toBe(202);
        const { job_id: jobId } = Submitted.parse(await response.json());
        expect((await finished(gateway.url, jobId)).state, uri).toBe('failed');
        const status = z.looseObject({ errors: z.array(z.looseObject({ code: z.string(), message: z.string() })) }).parse(await (await fetch(`${gateway.url}/v1/jobs/${jobId}`)).json());
        expect(status.errors[0]?.code).toBe('INVALID_INPUT');
        expect(status.errors[0]?.message).toContain('outside the allowed file roots');
      }
      expect(readdirSync(outsideDir)).toEqual(['existing']);
      expect(readdirSync(join(outsideDir, 'existing'))).toEqual([]);
    } finally {
      rmSync(join(roots, 'escape'), { force: true });
      rmSync(outsideDir, { recursive: true, force: true });
    }
  });

  it('a failed part is one {"part", "error"} line in place of its items', async () => {
    // GLiNER without labels cannot run: every part fails with INVALID_INPUT and is not retried.
    const response = await post(gateway.url, '/v1/jobs', { primitive: 'extract', request: { model: 'tiny-gliner', items: ['Ada Lovelace in London', 'Paris'] }, part_items: 1 });
    const { job_id: jobId } = Submitted.parse(await response.json());
    expect((await finished(gateway.url, jobId)).state).toBe('failed');
    const rows = lines(await (await fetch(`${gateway.url}/v1/jobs/${jobId}/results`)).text());
    expect(rows).toEqual([0, 1].map((part) => ({ part, error: expect.objectContaining({ code: 'INVALID_INPUT', message: expect.stringContaining('labels') }) })));
  });

  it('answers 404 for an unknown job', async () => {
    const missing = await fetch(`${gateway.url}/v1/jobs/no-such-job/results`);
    expect(missing.status).toBe(404);
    expect(ErrorBody.parse(await missing.json()).error.code).toBe('NOT_FOUND');
  });
});
