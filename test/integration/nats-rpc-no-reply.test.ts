import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RpcServer } from '../../adapters/nats/rpc-server.js';
import { natsNames } from '../../adapters/protocol/subjects.js';
import type { InferenceEngine } from '../../pipelines/inference/engine.js';
import { NATS_SERVER_MISSING, natsServerAvailable, startNatsServer, type NatsServerHandle } from '../helpers/nats-server.js';
import { referenceEngine, TINY_MEAN, testConnection, uniquePrefix } from '../helpers/nats-worker.js';

/**
 * A request published without a reply subject is dropped unrun: nobody could receive its answer,
 * and running it anyway let any publisher keep a worker's models busy for nothing. The same
 * request with a reply subject is answered, so the worker did see both.
 */

describe.skipIf(!natsServerAvailable())(`request-reply without a reply subject ${natsServerAvailable() ? '' : NATS_SERVER_MISSING}`, () => {
  let server: NatsServerHandle;
  let nc: NatsConnection;
  let rpc: RpcServer;
  let engine: InferenceEngine;
  let batches = 0;
  const names = natsNames(uniquePrefix('noreply'));

  beforeAll(async () => {
    server = await startNatsServer();
    nc = await testConnection(server.url);
    engine = referenceEngine({ scheduler: { onBatch: () => batches++ } });
    await engine.preload(TINY_MEAN);
    rpc = new RpcServer({ nc, names, engine, workerId: 'noreply-worker', routes: [{ primitive: 'encode', model: TINY_MEAN }], resident: () => [TINY_MEAN] });
    rpc.start();
  }, 60_000);

  afterAll(async () => {
    await rpc?.drain();
    await engine?.close();
    await nc?.close();
    await server?.stop();
  });

  it('runs no batch for a published request, and answers the same request sent with a reply subject', async () => {
    const subject = names.serving('encode', TINY_MEAN);
    const body = JSON.stringify({ model: TINY_MEAN, items: ['nobody is listening'] });
    const before = batches;
    for (let i = 0; i < 20; i++) nc.publish(subject, body);
    await nc.flush();
    // A round trip after the publishes: the worker has handled them by the time it answers.
    const answered = await nc.request(subject, body, { timeout: 30_000 });
    expect(answered.json<{ ok: boolean }>().ok).toBe(true);
    expect(batches - before).toBe(1);
  }, 60_000);
});
