import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RpcServer } from '../../adapters/nats/rpc/rpc-server.js';
import { natsNames } from '../../adapters/protocol/subjects.js';
import { InferenceEngine } from '../../pipelines/inference/engine.js';
import { NATS_SERVER_MISSING, natsServerAvailable, startNatsServer, type NatsServerHandle } from '../helpers/nats-server.js';
import { FIXTURE_MODELS_DIR, TINY_MEAN, testConnection, uniquePrefix } from '../helpers/nats-worker.js';

/**
 * The worker's request-reply side under a full queue: with the engine's queue bound reached, a
 * request is answered OVERLOADED at once (with a retry hint) instead of being queued until the
 * caller's timeout runs out.
 */

describe.skipIf(!natsServerAvailable())(`request-reply over a full queue ${natsServerAvailable() ? '' : NATS_SERVER_MISSING}`, () => {
  let server: NatsServerHandle;
  let nc: NatsConnection;
  let engine: InferenceEngine;
  let rpc: RpcServer;
  const names = natsNames(uniquePrefix('rpcfull'));

  beforeAll(async () => {
    server = await startNatsServer();
    nc = await testConnection(server.url);
    engine = new InferenceEngine({ sources: { modelDirs: [FIXTURE_MODELS_DIR], allowDownload: false }, runtime: { intraOpThreads: 1 }, maxQueuedItems: 64 });
    await engine.encode({ model: TINY_MEAN, items: ['warm up'] });
    rpc = new RpcServer({
      nc,
      names,
      engine,
      workerId: 'full-worker',
      routes: [{ primitive: 'encode', model: TINY_MEAN }],
      resident: () => [TINY_MEAN],
      hasCapacity: (items) => engine.scheduler.hasCapacity(items),
      maxInFlightItems: 256,
    });
    rpc.start();
  }, 60_000);

  afterAll(async () => {
    await rpc?.drain();
    await engine?.close();
    await nc?.close();
    await server?.stop();
  });

  it('answers OVERLOADED at once when the queue is full, and serves the rest', async () => {
    const items = Array.from({ length: 64 }, (_, i) => `sentence number ${i} with a few words`);
    const body = JSON.stringify({ model: TINY_MEAN, items });
    const replies = await Promise.all(
      Array.from({ length: 40 }, async () => {
        const started = performance.now();
        const msg = await nc.request(names.serving('encode', TINY_MEAN), body, { timeout: 30_000 });
        return { ms: performance.now() - started, reply: msg.json<{ ok: boolean; error?: { code: string; details?: { retryAfterSeconds?: number } } }>() };
      }),
    );
    const refused = replies.filter((r) => !r.reply.ok);
    const served = replies.filter((r) => r.reply.ok);
    expect(served.length).toBeGreaterThan(0);
    expect(refused.length).toBeGreaterThan(0);
    for (const r of refused) {
      expect(r.reply.error?.code).toBe('OVERLOADED');
      expect(r.reply.error?.details?.retryAfterSeconds).toBeGreaterThan(0);
    }
    // Refusals do not wait behind the queue: they come back faster than the slowest served call.
    const slowestServed = Math.max(...served.map((r) => r.ms));
    const fastestRefusal = Math.min(...refused.map((r) => r.ms));
    expect(fastestRefusal).toBeLessThan(slowestServed);
  }, 60_000);
});
