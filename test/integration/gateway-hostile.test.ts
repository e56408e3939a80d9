import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ShoalMetrics } from '../../adapters/observability/metrics.js';
import { natsNames } from '../../adapters/protocol/subjects.js';
import { jetstreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { resolveGatewayConfig } from '../../services/gateway/config.js';
import { isLoopback, startGateway, type GatewayHandle } from '../../services/gateway/main.js';
import type { ShoalWorker } from '../../services/worker/worker.js';
import { NATS_SERVER_MISSING, natsServerAvailable, startNatsServer, type NatsServerHandle } from '../helpers/nats-server.js';
import { TINY_MEAN, startTestWorker, testConnection, uniquePrefix } from '../helpers/nats-worker.js';
import { reliabilityGatewayConfig } from '../reliability/gateway-config.js';
import { capturingLogger } from '../helpers/capturing-logger.js';

/**
 * The gateway in front of a real worker, tried as a careless or hostile caller would:
 * unknown models are 404 MODEL_NOT_FOUND listing the served ones (not 503 "start a worker"),
 * path-like model names are 422, jobs for made-up models store nothing (no consumer), job ids
 * are idempotent for the same content and 409 JOB_CONFLICT for other content, each refusal is
 * logged as one short line, and binding beyond loopback without tokens warns loudly.
 */

const ErrorBody = z.strictObject({ error: z.looseObject({ code: z.string(), message: z.string(), details: z.record(z.string(), z.unknown()).optional() }) });

function post(base: string, path: string, body: unknown): Promise<Response> {
  return fetch(`${base}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
}

describe.skipIf(!natsServerAvailable())(`gateway against hostile callers ${natsServerAvailable() ? '' : NATS_SERVER_MISSING}`, () => {
  let server: NatsServerHandle;
  let worker: ShoalWorker;
  let gateway: GatewayHandle;
  let nc: NatsConnection;
  const logs = capturingLogger();
  const prefix = uniquePrefix('gwhostile');

  beforeAll(async () => {
    server = await startNatsServer();
    worker = await startTestWorker(server.url, prefix, { models: [TINY_MEAN] });
    gateway = await startGateway({ config: reliabilityGatewayConfig(server.url, prefix), logger: logs.logger, metrics: new ShoalMetrics({ processMetrics: false }) });
    nc = await testConnection(server.url);
  }, 120_000);

  afterAll(async () => {
    await gateway?.close();
    await nc?.close();
    await worker?.drain();
    await server?.stop();
  });

  it('answers an unknown model with 404 MODEL_NOT_FOUND listing the served models, logged as one short line', async () => {
    const response = await post(gateway.url, '/v1/encode', { model: 'text-embedding-3-small', items: ['hello'] });
    expect(response.status).toBe(404);
    expect(response.headers.get('retry-after')).toBeNull();
    const body = ErrorBody.parse(await response.json());
    expect(body.error.code).toBe('MODEL_NOT_FOUND');
    expect(body.error.details?.served).toEqual([TINY_MEAN]);
    expect(body.error.message).toContain(TINY_MEAN);
    const logged = logs.lines().filter((line) => line.code === 'MODEL_NOT_FOUND');
    expect(logged).toHaveLength(1);
    expect(logged[0]?.level).toBe(30);
    expect(JSON.stringify(logged[0]).length).toBeLessThan(600);
    expect(JSON.stringify(logged[0])).not.toContain('at ');

    // The OpenAI SDK sees a 404 at once (no retries on 503 for 10 s).
    const client = new OpenAI({ apiKey: 'unused', baseURL: `${gateway.url}/v1` });
    const started = Date.now();
    const failure = await client.embeddings.create({ model: 'text-embedding-3-small', input: ['x'] }).catch((e: unknown) => e);
    expect(failure).toBeInstanceOf(OpenAI.NotFoundError);
    expect(Date.now() - started).toBeLessThan(3_000);
  });

  it('refuses path-like model names with 422 INVALID_INPUT on sync calls and jobs', async () => {
    for (const model of ['../../etc/passwd', '/etc/passwd', 'a/../b', 'x\\y']) {
      const sync = await post(gateway.url, '/v1/encode', { model, items: ['a'] });
      expect([sync.status, ErrorBody.parse(await sync.json()).error.code]).toEqual([422, 'INVALID_INPUT']);
      const job = await post(gateway.url, '/v1/jobs', { primitive: 'encode', request: { model, items: ['a'] } });
      expect([job.status, ErrorBody.parse(await job.json()).error.code]).toEqual([422, 'INVALID_INPUT']);
    }
  });

  it('stores nothing for jobs naming made-up models: 404, no status, no consumer', async () => {
    const jsm = await jetstreamManager(nc);
    const names = natsNames(prefix);
    const before = (await jsm.consumers.list(names.jobsStream).next()).length;
    for (let i = 0; i < 20; i++) {
      const response = await post(gateway.url, '/v1/jobs', { job_id: `madeup-${i}`, primitive: 'encode', request: { model: `made-up-${i}`, items: ['a'] } });
      expect(response.status).toBe(404);
      expect(ErrorBody.parse(await response.json()).error.code).toBe('MODEL_NOT_FOUND');
    }
    expect((await jsm.consumers.list(names.jobsStream).next()).length).toBe(before);
    expect((await fetch(`${gateway.url}/v1/jobs/madeup-3`)).status).toBe(404);
  });

  it('refuses at submit a job for an operation its model lacks (400 UNSUPPORTED_OPERATION), as the synchronous route does, storing nothing', async () => {
    const response = await post(gateway.url, '/v1/jobs', { job_id: 'wrong-op', primitive: 'extract', request: { model: TINY_MEAN, items: ['a'] } });
    expect(response.status).toBe(400);
    expect(ErrorBody.parse(await response.json()).error).toMatchObject({ code: 'UNSUPPORTED_OPERATION', message: `model "${TINY_MEAN}" is served, but not for extract (it answers encode, score)` });
    expect((await fetch(`${gateway.url}/v1/jobs/wrong-op`)).status).toBe(404);
    const sync = await post(gateway.url, '/v1/extract', { model: TINY_MEAN, items: ['a'] });
    expect([sync.status, ErrorBody.parse(await sync.json()).error.code]).toEqual([400, 'UNSUPPORTED_OPERATION']);
  });

  it('answers a resubmitted job id idempotently for the same content and 409 JOB_CONFLICT for other content', async () => {
    const job = { job_id: 'same-id', primitive: 'encode', request: { model: TINY_MEAN, items: ['a', 'b'] } };
    const first = await post(gateway.url, '/v1/jobs', job);
    expect(first.status).toBe(202);
    // The job itself, not its status: a worker may have started it between the two answers.
    const Accepted = z.object({ job_id: z.string(), parts: z.number(), items: z.number() });
    const firstBody = Accepted.parse(await first.json());
    const again = await post(gateway.url, '/v1/jobs', job);
    expect(again.status).toBe(202);
    expect(Accepted.parse(await again.json())).toEqual(firstBody);
    const other = await post(gateway.url, '/v1/jobs', { ...job, request: { model: TINY_MEAN, items: ['c', 'd', 'e'] } });
    expect(other.status).toBe(409);
    const body = ErrorBody.parse(await other.json());
    expect(body.error.code).toBe('JOB_CONFLICT');
    expect(body.error.message).toContain('same-id');
  });

  it('listens on 127.0.0.1 unless told otherwise', () => {
    expect(resolveGatewayConfig({}, {}).host).toBe('127.0.0.1');
    expect(resolveGatewayConfig({}, { SHOAL_HOST: '0.0.0.0' }).host).toBe('0.0.0.0');
    expect(['127.0.0.1', '127.1.2.3', 'localhost', '::1', '[::1]'].every(isLoopback)).toBe(true);
    expect(['0.0.0.0', '::', '10.0.0.1', '192.168.1.2'].some(isLoopback)).toBe(false);
  });

  it('warns loudly when it listens beyond loopback without tokens, and not on loopback', async () => {
    const open = capturingLogger();
    const exposed = await startGateway({ config: reliabilityGatewayConfig(server.url, prefix, { host: '0.0.0.0' }), logger: open.logger, metrics: new ShoalMetrics({ processMetrics: false }) });
    await exposed.close();
    const warnings = open.lines().filter((line) => line.level === 40 && String(line.msg).includes('WITHOUT authentication'));
    expect(warnings).toHaveLength(1);
    expect(String(warnings[0]?.msg)).toContain('SHOAL_API_TOKENS');
    expect(logs.lines().some((line) => String(line.msg).includes('WITHOUT authentication'))).toBe(false);
  });

  it('logs and counts failed logins without the token', async () => {
    const token = 'a-valid-token-of-enough-length';
    const guarded = capturingLogger();
    const secured = await startGateway({
      config: reliabilityGatewayConfig(server.url, prefix, { apiTokens: [token] }),
      logger: guarded.logger,
      metrics: new ShoalMetrics({ processMetrics: false }),
    });
    try {
      const wrong = 'guessed-token-0123456789';
      const attempts = [
        await fetch(`${secured.url}/v1/models`, { headers: { authorization: `Bearer ${wrong}` } }),
        await fetch(`${secured.url}/v1/models`, { headers: { authorization: `Bearer ${wrong}` } }),
        await fetch(`${secured.url}/v1/models`),
        // A token in the query string is refused, and never logged with the URL.
        await fetch(`${secured.url}/v1/models?access_token=${wrong}-in-query`),
      ];
      expect(attempts.map((r) => r.status)).toEqual([401, 401, 401, 401]);
      expect((await fetch(`${secured.url}/v1/models`, { headers: { authorization: `Bearer ${token}` } })).status).toBe(200);
      const failures = guarded.lines().filter((line) => line.msg === 'authentication failed');
      expect(failures.map((line) => line.reason)).toEqual(['invalid', 'invalid', 'missing', 'missing']);
      expect(failures.map((line) => line.url)).toEqual(['/v1/models', '/v1/models', '/v1/models', '/v1/models']);
      expect(JSON.stringify(guarded.lines())).not.toContain(wrong);
      const metrics = await (await fetch(`${secured.url}/metrics`)).text();
      expect(metrics).toMatch(/shoal_auth_failures_total\{[^}]*reason="invalid"[^}]*\} 2/);
      expect(metrics).toMatch(/shoal_auth_failures_total\{[^}]*reason="missing"[^}]*\} 2/);
    } finally {
      await secured.close();
    }
  });
});
