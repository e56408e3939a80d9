import type { FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ShoalMetrics } from '../../../../adapters/observability/metrics.js';
import { ErrorCode } from '../../../../adapters/protocol/errors.js';
import { IngestAccepted } from '../../../../adapters/protocol/http-responses.js';
import { buildGatewayApp } from '../../../../services/gateway/app.js';
import { MemoryJobs, ScriptedEngine, TEST_SETTINGS } from '../../../helpers/gateway.js';
import { MemoryIngest } from '../../../helpers/memory-ingest.js';

/**
 * POST /v1/ingest?wait=true answers once the run is over (200, its final status), so a search
 * right after it sees the documents; a run still going at the gateway's request timeout is
 * answered 202 as without `wait`, never a 504. Without `wait` nothing changes: 202 at once.
 */

let app: FastifyInstance | undefined;
afterEach(async () => {
  await app?.close();
  app = undefined;
});

async function gateway(ingest: MemoryIngest, requestTimeoutMs = 30_000): Promise<FastifyInstance> {
  app = buildGatewayApp(
    { engine: ScriptedEngine.failing(ErrorCode.INTERNAL), jobs: new MemoryJobs(), ingest, models: async () => [], metrics: new ShoalMetrics({ processMetrics: false }), ready: async () => ({ ready: true }) },
    { ...TEST_SETTINGS, requestTimeoutMs, indexes: { docs: '/tmp/shoal-never-written' } },
  );
  await app.ready();
  return app;
}

const body = { index: 'docs', sources: [{ id: 'n1', text: 'The pilot boat leaves at dawn.' }] };

describe('POST /v1/ingest?wait=true', () => {
  it('answers 200 with the finished run once its status says so', async () => {
    const ingest = new MemoryIngest({ finishAfterReads: 3 });
    const gw = await gateway(ingest);
    const response = await gw.inject({ method: 'POST', url: '/v1/ingest?wait=true', payload: body });
    expect(response.statusCode, response.body).toBe(200);
    const answer = IngestAccepted.parse(response.json());
    expect(answer.status).toMatchObject({ state: 'completed', documents: { total: 1, ok: 1 } });
    expect(response.headers.location).toBe(`/v1/jobs/${answer.job_id}`);
  });

  it('answers 202 with the run still going when the request timeout comes first', async () => {
    const ingest = new MemoryIngest({ finishAfterReads: Number.MAX_SAFE_INTEGER });
    const gw = await gateway(ingest, 400);
    const began = performance.now();
    const response = await gw.inject({ method: 'POST', url: '/v1/ingest?wait=true', payload: body });
    const took = performance.now() - began;
    expect(response.statusCode, response.body).toBe(202);
    expect(IngestAccepted.parse(response.json()).status.state).toBe('queued');
    expect(took).toBeGreaterThanOrEqual(390);
    expect(took).toBeLessThan(5_000);
  });

  it('without wait (or wait=false) answers 202 at once, and refuses another value', async () => {
    const ingest = new MemoryIngest({ finishAfterReads: 0 });
    const gw = await gateway(ingest);
    for (const url of ['/v1/ingest', '/v1/ingest?wait=false']) {
      const response = await gw.inject({ method: 'POST', url, payload: { ...body, job_id: url.includes('false') ? 'w-false' : 'w-none' } });
      expect(response.statusCode, url).toBe(202);
      expect(IngestAccepted.parse(response.json()).status.state).toBe('queued');
    }
    const refused = await gw.inject({ method: 'POST', url: '/v1/ingest?wait=yes', payload: body });
    expect(refused.statusCode).toBe(422);
    expect(z.looseObject({ error: z.looseObject({ code: z.string(), message: z.string() }) }).parse(refused.json()).error.message).toContain('wait');
    // A POST with no body at all is still told to send one (the upload route reads multipart itself).
    const bodiless = await gw.inject({ method: 'POST', url: '/v1/ingest' });
    expect(bodiless.statusCode).toBe(422);
    expect(bodiless.json()).toMatchObject({ error: { code: 'INVALID_INPUT', message: expect.stringContaining('the request body is empty') } });
    expect(ingest.started).toHaveLength(2);
  });
});
