import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { denseBytesAtLeast } from '../../pipelines/inference/dense-output.js';
import { NATS_SERVER_MISSING, natsServerAvailable } from '../helpers/nats-server.js';
import { startCountingRpc, TINY_MEAN, type CountingRpc } from '../helpers/nats-worker.js';

/**
 * A request-reply encode whose dense vectors could never fit in one NATS reply (items × dimensions
 * × bytes per value over the server's max_payload) is refused with INPUT_TOO_LARGE before any
 * batch runs, naming how many items would fit. It used to compute every vector (a 100,000-item
 * request held a worker for minutes) and only then find the reply too large to send.
 */

describe('the fewest bytes of dense vectors', () => {
  it('is items × kept dimensions × bytes per value, bits packed 8 per byte', () => {
    expect(denseBytesAtLeast(10, 384, { dtype: 'float32' })).toBe(15_360);
    expect(denseBytesAtLeast(10, 384, { dtype: 'float16' })).toBe(7_680);
    expect(denseBytesAtLeast(10, 384, { dtype: 'int8' })).toBe(3_840);
    expect(denseBytesAtLeast(10, 384, { dtype: 'uint8' })).toBe(3_840);
    expect(denseBytesAtLeast(10, 384, { dtype: 'binary' })).toBe(480);
    expect(denseBytesAtLeast(10, 12, { dtype: 'ubinary' })).toBe(20);
    expect(denseBytesAtLeast(10, 384, { dtype: 'float32', dimensions: 64 })).toBe(2_560);
    // More dimensions than the model has are refused later, by the shaping; the bound uses the model's.
    expect(denseBytesAtLeast(10, 8, { dtype: 'float32', dimensions: 64 })).toBe(320);
  });
});

describe.skipIf(!natsServerAvailable())(`request-reply encode too large for one reply ${natsServerAvailable() ? '' : NATS_SERVER_MISSING}`, () => {
  let rpc: CountingRpc;
  beforeAll(async () => {
    rpc = await startCountingRpc('rpcsize', 'size-worker');
  }, 60_000);
  afterAll(async () => rpc?.stop());

  async function encode(body: Record<string, unknown>): Promise<{ ok: boolean; error?: { code: string; message: string; details?: Record<string, unknown> }; result?: { items: unknown[] } }> {
    const msg = await rpc.nc.request(rpc.names.serving('encode', TINY_MEAN), JSON.stringify({ model: TINY_MEAN, ...body }), { timeout: 30_000 });
    return msg.json();
  }

  it('refuses 40,000 float32 vectors of 8 dimensions (1.28 MB > 1 MiB) before any batch, naming what fits', async () => {
    const limit = rpc.nc.info?.max_payload ?? 0;
    expect(limit).toBe(1024 * 1024);
    const before = rpc.batches();
    const reply = await encode({ items: Array.from({ length: 40_000 }, (_, i) => `t${i % 10}`) });
    expect(reply.ok).toBe(false);
    expect(reply.error?.code).toBe('INPUT_TOO_LARGE');
    expect(reply.error?.message).toContain('1280000 bytes');
    expect(reply.error?.message).toContain(`send at most ${Math.floor(limit / 32)} items`);
    expect(reply.error?.details?.itemsThatFit).toBe(Math.floor(limit / 32));
    expect(rpc.batches()).toBe(before);
  }, 60_000);

  it('still encodes a request whose vectors fit, and counts the smaller dtype', async () => {
    const small = await encode({ items: ['alpha', 'beta', 'gamma'] });
    expect(small.ok).toBe(true);
    expect(small.result?.items).toHaveLength(3);
    // The same 40,000 items as binary vectors need 1 byte each: no refusal up front (the reply as
    // a whole may still be over the limit, which only the finished reply can tell).
    const before = rpc.batches();
    const binary = await encode({ items: Array.from({ length: 40_000 }, (_, i) => `t${i % 10}`), dtype: 'binary' });
    expect(binary.error?.message ?? '').not.toContain('take at least');
    expect(rpc.batches()).toBeGreaterThan(before);
  }, 120_000);
});
