import type { NatsConnection } from '@nats-io/transport-node';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { JobsClient } from '../../adapters/nats/jobs/jobs-client.js';
import { ShoalMetrics } from '../../adapters/observability/metrics.js';
import { EncodeResult, ScoreResult } from '../../adapters/protocol/results.js';
import { RPC_HEADERS } from '../../adapters/nats/rpc/rpc-wire.js';
import { natsNames } from '../../adapters/protocol/subjects.js';
import { resolveGatewayConfig } from '../../services/gateway/config.js';
import { DEFAULT_REQUEST_TIMEOUT_MS } from '../../services/gateway/defaults.js';
import { startGateway, type GatewayHandle } from '../../services/gateway/main.js';
import type { ShoalWorker } from '../../services/worker/worker.js';
import { expectAllClose } from '../helpers/conformance.js';
import { NATS_SERVER_MISSING, natsServerAvailable, startNatsServer, type NatsServerHandle } from '../helpers/nats-server.js';
import { TINY_CROSS, TINY_MEAN, quietLogger, startTestWorker, testConnection, uniquePrefix } from '../helpers/nats-worker.js';
import { firstTokenLogit, hiddenStates, l2Normalize, loadTinyModel, meanPool, sigmoid, tokenOutputs } from '../helpers/tiny-model.js';

/**
 * The gateway as deployed: startGateway (config → NATS engine and jobs clients → HTTP) against a
 * private nats-server and a worker on the fixture models. Sync calls go over request-reply, jobs
 * over JetStream, /v1/models comes from worker discovery, and close() lets in-flight requests end.
 */

const ATOL = 2e-5;
const bert = loadTinyModel('tiny-bert-mean');
const cross = loadTinyModel('tiny-cross-encoder');
const wrap = (...tokens: string[]): string[] => ['[CLS]', ...tokens, '[SEP]'];
const embedding = (tokens: string[]): number[] => l2Normalize(meanPool(tokenOutputs(bert, { ids: bert.ids(tokens) })));
const EXPECTED = [embedding(wrap('a', 'dog')), embedding(wrap('a', 'cat'))];
function rerank(query: string, passage: string): number {
  const first = wrap(...query.split(' '));
  const second = [...passage.split(' '), '[SEP]'];
  const types = [...first.map(() => 0), ...second.map(() => 1)];
  return sigmoid(firstTokenLogit(cross, hiddenStates(cross, { ids: cross.ids([...first, ...second]), types })));
}

const ErrorBody = z.strictObject({ error: z.looseObject({ code: z.string(), message: z.string() }) });

function post(base: string, path: string, body: unknown): Promise<Response> {
  return fetch(`${base}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
}

describe.skipIf(!natsServerAvailable())(`gateway over NATS ${natsServerAvailable() ? '' : NATS_SERVER_MISSING}`, () => {
  let server: NatsServerHandle;
  let worker: ShoalWorker;
  let gateway: GatewayHandle;
  let nc: NatsConnection;
  const prefix = uniquePrefix('gw');

  beforeAll(async () => {
    server = await startNatsServer();
    worker = await startTestWorker(server.url, prefix, { models: [TINY_MEAN, TINY_CROSS] });
    const config = resolveGatewayConfig({ host: '127.0.0.1', port: '0', natsUrl: server.url, natsPrefix: prefix, embedModel: TINY_MEAN }, {});
    gateway = await startGateway({ config, logger: quietLogger(), metrics: new ShoalMetrics({ processMetrics: false }) });
    nc = await testConnection(server.url);
  }, 120_000);

  afterAll(async () => {
    await gateway?.close();
    await nc?.close();
    await worker?.drain();
    await server?.stop();
  });

  it('is ready when NATS answers, and lists the models the workers serve', async () => {
    expect((await fetch(`${gateway.url}/readyz`)).status).toBe(200);
    const models = z.looseObject({ data: z.array(z.looseObject({ id: z.string(), object: z.literal('model') })) }).parse(await (await fetch(`${gateway.url}/v1/models`)).json());
    expect(models.data.map((m) => m.id)).toEqual([TINY_MEAN, TINY_CROSS]);
  });

  it('serves /v1/encode and /v1/score through request-reply with the fixture outputs', async () => {
    const encoded = EncodeResult.parse(await (await post(gateway.url, '/v1/encode', { model: TINY_MEAN, items: ['a dog', 'a cat'] })).json());
    encoded.items.forEach((item, i) => expectAllClose(item.dense ?? [], EXPECTED[i] ?? [], ATOL, `item ${i}`));
    const passages = ['the dog runs in the park', 'cats live in houses'];
    const scored = ScoreResult.parse(await (await post(gateway.url, '/v1/score', { model: TINY_CROSS, query: 'where do cats live', items: passages })).json());
    for (const s of scored.scores) expect(Math.abs(s.score - rerank('where do cats live', passages[s.index] ?? ''))).toBeLessThanOrEqual(ATOL);
  });

  it('serves the openai client and TEI /embed over NATS', async () => {
    const client = new OpenAI({ apiKey: 'unused', baseURL: `${gateway.url}/v1`, maxRetries: 0 });
    const result = await client.embeddings.create({ model: TINY_MEAN, input: ['a dog', 'a cat'] });
    result.data.forEach((d, i) => expectAllClose(d.embedding, EXPECTED[i] ?? [], ATOL, `openai ${i}`));
    const tei = z.array(z.array(z.number())).parse(await (await post(gateway.url, '/embed', { inputs: 'a cat' })).json());
    expectAllClose(tei[0] ?? [], EXPECTED[1] ?? [], ATOL, 'tei');
  });

  it('maps NATS failures to codes: a model no worker serves is 404 MODEL_NOT_FOUND listing the served ones', async () => {
    const response = await post(gateway.url, '/v1/encode', { model: 'tiny-splade', items: ['x'] });
    expect([response.status, response.headers.get('retry-after')]).toEqual([404, null]);
    const body = ErrorBody.parse(await response.json());
    expect(body.error.code).toBe('MODEL_NOT_FOUND');
    expect(body.error.message).toContain(`no worker serves model "tiny-splade" for encode; served models: ${TINY_MEAN}, ${TINY_CROSS}`);
  });

  it('queues a job on JetStream and the worker completes it', async () => {
    const response = await post(gateway.url, '/v1/jobs', { job_id: 'gw-job-1', primitive: 'encode', request: { model: TINY_MEAN, items: ['a dog', 'a cat'] }, part_items: 1 });
    expect(response.status).toBe(202);
    const jobs = await JobsClient.open(nc, { topology: { prefix } });
    const done = await jobs.wait('gw-job-1', { timeoutMs: 30_000 });
    expect(done).toMatchObject({ state: 'completed', parts: 2, parts_done: 2 });
    const status = await (await fetch(`${gateway.url}/v1/jobs/gw-job-1`)).json();
    expect(status).toMatchObject({ state: 'completed', items: 2, results: { kind: 'stream', subject: `${prefix}.results.gw-job-1.*` } });
  });

  it('waits for a worker that holds the model as long as its own request timeout (60 s by default), not a fixed 10 s', async () => {
    // A stand-in worker that holds "slow-model": it records the deadline the gateway sends with
    // the request (the wait the gateway itself applies) and answers at once.
    const deadlines: string[] = [];
    const holder = nc.subscribe(natsNames(prefix).resident('encode', 'slow-model'), {
      callback: (_error, msg) => {
        deadlines.push(msg.headers?.get(RPC_HEADERS.timeoutMs) ?? '');
        msg.respond(JSON.stringify({ ok: false, worker: 'stand-in', error: { code: 'UNAVAILABLE', message: 'stand-in worker' } }));
      },
    });
    try {
      const response = await post(gateway.url, '/v1/encode', { model: 'slow-model', items: ['x'] });
      expect(response.status).toBe(503);
      expect(deadlines).toEqual([String(DEFAULT_REQUEST_TIMEOUT_MS)]);
    } finally {
      holder.unsubscribe();
    }
  });

  it('with a drain delay, close() keeps serving with /readyz at 503 until the delay is over, then closes the port', async () => {
    const config = resolveGatewayConfig({ host: '127.0.0.1', port: '0', natsUrl: server.url, natsPrefix: prefix, embedModel: TINY_MEAN, drainDelayMs: '1500' }, {});
    const draining = await startGateway({ config, logger: quietLogger(), metrics: new ShoalMetrics({ processMetrics: false }) });
    expect((await fetch(`${draining.url}/readyz`)).status).toBe(200);
    const started = Date.now();
    const closed = draining.close();
    // Inside the delay: not ready (a load balancer takes the replica out), still answering calls.
    const ready = await fetch(`${draining.url}/readyz`);
    expect(ready.status).toBe(503);
    expect(ErrorBody.parse(await ready.json()).error.message).toContain('shutting down');
    const call = await post(draining.url, '/v1/encode', { model: TINY_MEAN, items: ['a dog'] });
    expect(call.status).toBe(200);
    expect(call.headers.get('connection')).toBe('close');
    expectAllClose(EncodeResult.parse(await call.json()).items[0]?.dense ?? [], EXPECTED[0] ?? [], ATOL, 'while draining');
    await closed;
    expect(Date.now() - started).toBeGreaterThanOrEqual(1_400);
    await expect(fetch(`${draining.url}/healthz`)).rejects.toThrow();
  });

  it('close() lets a request that is already running finish, then refuses new connections', async () => {
    const running = post(gateway.url, '/v1/encode', { model: TINY_MEAN, items: ['a dog'] });
    // The request is on the wire before the drain starts: wait until the server has accepted it.
    await new Promise<void>((resolve) => gateway.app.server.once('request', () => resolve()));
    const closing = gateway.close();
    const response = await running;
    expect(response.status).toBe(200);
    expectAllClose(EncodeResult.parse(await response.json()).items[0]?.dense ?? [], EXPECTED[0] ?? [], ATOL, 'in-flight');
    const started = Date.now();
    await closing;
    // Well inside the 30 s shutdown timeout: nothing waited for idle keep-alive connections.
    expect(Date.now() - started).toBeLessThan(5_000);
    await expect(fetch(`${gateway.url}/healthz`)).rejects.toThrow();
  });
});
