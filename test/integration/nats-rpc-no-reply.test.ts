import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NATS_SERVER_MISSING, natsServerAvailable } from '../helpers/nats-server.js';
import { startCountingRpc, TINY_MEAN, type CountingRpc } from '../helpers/nats-worker.js';

/**
 * A request published without a reply subject is dropped unrun: nobody could receive its answer,
 * and running it anyway let any publisher keep a worker's models busy for nothing. The same
 * request with a reply subject is answered, so the worker did see both.
 */

describe.skipIf(!natsServerAvailable())(`request-reply without a reply subject ${natsServerAvailable() ? '' : NATS_SERVER_MISSING}`, () => {
  let rpc: CountingRpc;
  beforeAll(async () => {
    rpc = await startCountingRpc('noreply', 'noreply-worker');
  }, 60_000);
  afterAll(async () => rpc?.stop());

  it('runs no batch for a published request, and answers the same request sent with a reply subject', async () => {
    const { nc, names } = rpc;
    const subject = names.serving('encode', TINY_MEAN);
    const body = JSON.stringify({ model: TINY_MEAN, items: ['nobody is listening'] });
    const before = rpc.batches();
    for (let i = 0; i < 20; i++) nc.publish(subject, body);
    await nc.flush();
    // A round trip after the publishes: the worker has handled them by the time it answers.
    const answered = await nc.request(subject, body, { timeout: 30_000 });
    expect(answered.json<{ ok: boolean }>().ok).toBe(true);
    expect(rpc.batches() - before).toBe(1);
  }, 60_000);
});
