import { describe, expect, it } from 'vitest';
import { packReply, unpackReply } from '../../../../adapters/nats/rpc/packed-vectors.js';
import { encodeJson } from '../../../../adapters/nats/rpc/rpc-wire.js';
import { RpcReplyEnvelope } from '../../../../adapters/protocol/jobs.js';
import { EncodeResult } from '../../../../adapters/protocol/results.js';

/** Float32 values, so a packed round trip must give them back exactly. */
const f32 = (values: number[]): number[] => Array.from(new Float32Array(values));

describe('packed (f32-v1) request-reply bodies', () => {
  const reply = {
    ok: true,
    worker: 'w1',
    result: {
      model: 'm',
      items: [
        { index: 0, id: 'a', dense: f32([0.1, -0.2, 0.3, 1e-9, -7.5]), truncated: false },
        { index: 1, multivector: [f32([1, 2, 3]), f32([4, 5, 6])] },
        { index: 2, sparse: { indices: [3, 70000], values: [0.5, 1.25] } },
        { index: 3, id: 7, dense: f32([0.25, 0.5, 0.75, 1, 1.25]), multivector: [f32([9, 8, 7])] },
      ],
      usage: { items: 4, tokens: 40 },
    },
  };

  it('gives back the same reply, every vector exact, and is smaller than JSON', () => {
    const body = packReply(reply);
    expect(body).not.toBeNull();
    const back = unpackReply(body ?? new Uint8Array());
    expect(back).toEqual(reply);
    const parsed = RpcReplyEnvelope.parse(back);
    expect(parsed.ok && EncodeResult.parse(parsed.result).items.map((item) => item.index)).toEqual([0, 1, 2, 3]);
    const vectors = { ...reply, result: { ...reply.result, items: [{ index: 0, dense: f32(Array.from({ length: 384 }, (_, i) => Math.sin(i))) }] } };
    const packed = packReply(vectors) ?? new Uint8Array();
    expect(packed.byteLength).toBeLessThan(encodeJson(vectors).byteLength / 3);
    expect(unpackReply(packed)).toEqual(vectors);
  });

  it('reads a body that sits at an odd offset of a larger (pooled) buffer', () => {
    const body = packReply(reply) ?? new Uint8Array();
    const pool = Buffer.alloc(body.byteLength + 7);
    pool.set(body, 3);
    expect(unpackReply(pool.subarray(3, 3 + body.byteLength))).toEqual(reply);
  });

  it('leaves replies without vectors, errors and other results to JSON', () => {
    expect(packReply({ ok: false, worker: 'w', error: { code: 'INVALID_INPUT', message: 'no' } })).toBeNull();
    expect(packReply({ ok: true, worker: 'w', result: { model: 'm', items: [{ index: 0, score: 0.5 }], usage: { items: 1, tokens: 3 } } })).toBeNull();
    expect(packReply({ ok: true, worker: 'w', result: { model: 'm', items: [{ index: 0, sparse: { indices: [1], values: [2] } }] } })).toBeNull();
  });

  it('refuses malformed bodies with an error instead of wrong vectors', () => {
    const body = packReply(reply) ?? new Uint8Array();
    expect(() => unpackReply(body.subarray(0, 2))).toThrow(/malformed/);
    expect(() => unpackReply(body.subarray(0, body.byteLength - 4))).toThrow(/past the end/);
    const json = Buffer.from(JSON.stringify({ ok: true, worker: 'w', result: { items: [{ index: 0, dense: { $f32: [0, -1] } }] } }));
    const forged = new Uint8Array(4 + Math.ceil(json.byteLength / 4) * 4);
    new DataView(forged.buffer).setUint32(0, json.byteLength, true);
    forged.set(json, 4);
    expect(() => unpackReply(forged)).toThrow(/bad vector marker/);
  });
});
