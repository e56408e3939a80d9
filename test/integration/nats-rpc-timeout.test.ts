import { headers, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RpcServer } from '../../adapters/nats/rpc/rpc-server.js';
import { RPC_HEADERS } from '../../adapters/nats/rpc/rpc-wire.js';
import { natsNames } from '../../adapters/protocol/subjects.js';
import { ScriptedEngine } from '../helpers/gateway.js';
import { NATS_SERVER_MISSING, natsServerAvailable, startNatsServer, type NatsServerHandle } from '../helpers/nats-server.js';
import { TINY_MEAN, testConnection, uniquePrefix } from '../helpers/nats-worker.js';

/**
 * A request-reply call whose own deadline (Shoal-Timeout-Ms) passes on the worker is answered
 * TIMEOUT (504 through the gateway), not CANCELLED: the caller did not go away, the work ran long.
 */

describe.skipIf(!natsServerAvailable())(`request-reply past its deadline ${natsServerAvailable() ? '' : NATS_SERVER_MISSING}`, () => {
  let server: NatsServerHandle;
  let nc: NatsConnection;
  let rpc: RpcServer;
  const names = natsNames(uniquePrefix('rpctimeout'));

  beforeAll(async () => {
    server = await startNatsServer();
    nc = await testConnection(server.url);
    rpc = new RpcServer({ nc, names, engine: ScriptedEngine.hanging(), workerId: 'slow-worker', routes: [{ primitive: 'encode', model: TINY_MEAN }], resident: () => [TINY_MEAN] });
    rpc.start();
  }, 60_000);

  afterAll(async () => {
    await rpc?.drain();
    await nc?.close();
    await server?.stop();
  });

  it('answers TIMEOUT once the caller’s Shoal-Timeout-Ms has passed', async () => {
    const h = headers();
    h.set(RPC_HEADERS.timeoutMs, '300');
    const started = performance.now();
    const msg = await nc.request(names.serving('encode', TINY_MEAN), JSON.stringify({ model: TINY_MEAN, items: ['slow'] }), { timeout: 10_000, headers: h });
    const reply = msg.json<{ ok: boolean; error?: { code: string; message: string } }>();
    expect(reply.ok).toBe(false);
    expect(reply.error?.code).toBe('TIMEOUT');
    expect(reply.error?.message).toContain('300 ms');
    expect(performance.now() - started).toBeLessThan(5_000);
  }, 30_000);
});
