import { createServer, type Socket } from 'node:net';
import { QdrantClient } from '@qdrant/js-client-rest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ErrorCode } from '../../../../../adapters/protocol/errors.js';
import { RetryingStore } from '../../../../../adapters/stores/shared/delivery.js';
import { pointId, QdrantStore } from '../../../../../adapters/stores/qdrant/store.js';
import { startQdrantFake, type QdrantFakeHandle } from '../../../../helpers/qdrant-fake.js';
import { storeContract } from '../../../../conformance/stores/contract.js';

/**
 * The Qdrant sink. No Qdrant server can run on these machines: it is tested against
 * test/helpers/qdrant-fake.ts, a loopback HTTP server implementing Qdrant's documented REST
 * contract for the calls the sink makes (README: "Vector databases").
 */

let server: QdrantFakeHandle;
beforeAll(async () => {
  server = await startQdrantFake();
});
afterAll(async () => server?.stop());

/** Qdrant's own REST client (not the sink). */
const client = (): QdrantClient => new QdrantClient({ host: '127.0.0.1', port: server.port, https: false, checkCompatibility: false });

/** 0/1 values packed 8 per byte, first in the high bit (binary: minus 128), written here apart from the sink's packing. */
function packed(bits: readonly number[], type: string): number[] {
  const bytes = (bits.map((bit) => (bit > 0.5 ? '1' : '0')).join('').match(/.{1,8}/g) ?? []).map((group) => parseInt(group.padEnd(8, '0'), 2));
  return type === 'binary' ? bytes.map((byte) => byte - 128) : bytes;
}

const DenseParams = z.object({ config: z.object({ params: z.object({ vectors: z.object({ dense: z.object({ size: z.number(), distance: z.string(), datatype: z.string().optional() }) }) }) }) });

storeContract('qdrant (REST contract server)', (collection) => new QdrantStore({ host: '127.0.0.1', port: server.port, collection }), {
  unsupportedFilters: ['like'],
  refusedMetadataFilters: ['string-range'],
  storedVectors: {
    read: async (collection, id, type) => {
      const [point] = await client().retrieve(collection, { ids: [pointId(id)], with_vector: true, with_payload: false });
      const dense = z.object({ dense: z.array(z.number()) }).parse(point?.vector).dense;
      return type === 'binary' || type === 'ubinary' ? packed(dense, type) : dense.map(Math.fround);
    },
    storage: async (collection) => {
      const { dense } = DenseParams.parse(await client().getCollection(collection)).config.params.vectors;
      return `${dense.size} ${dense.distance} ${dense.datatype ?? 'float32'}`;
    },
    // float16 and uint8 natively; int8 codes as float32; the binary types as one 0/1 uint8 per dimension under Euclid (Hamming).
    native: { float32: '20 Euclid float32', float16: '20 Euclid float16', int8: '20 Euclid float32', uint8: '20 Euclid uint8', binary: '24 Euclid uint8', ubinary: '24 Euclid uint8' },
  },
});

describe('QdrantStore', () => {
  it('derives UUID point ids deterministically, keeps our id in the payload and stores sparse vectors', async () => {
    expect(pointId('a:b:0')).toBe(pointId('a:b:0'));
    expect(pointId('a:b:0')).not.toBe(pointId('a:b:1'));
    expect(pointId('x')).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    const sink = new QdrantStore({ host: '127.0.0.1', port: server.port, collection: 'sparse' });
    await sink.prepare({ dimension: 2, distance: 'l2', optionalColumns: [], metadata: {} });
    const row = { id: 'doc:1', document_id: 'd', source: 's', page: 1, chunk: 0, text: 't', start: 0, end: 1, heading: null, settings: 's', vector: [3, 4], entities: null, labels: null, ingested_at: 'now', sparse: { indices: [7], values: [0.25], dimension: 100 } };
    await sink.commit([row], [{ source: 's', document_id: 'd', settings: 's', chunks: 1, pages: 1, ingested_at: 'now' }]);
    const stored = server.collections.get('sparse')?.points.get(pointId('doc:1'));
    expect(stored?.payload.id).toBe('doc:1');
    expect(stored?.sparse).toEqual({ indices: [7], values: [0.25] });
    const [hit] = await sink.search([0, 0], { k: 1 });
    expect(hit?.row.id).toBe('doc:1');
    expect(hit?.score).toBeCloseTo(-25, 6);
    expect(server.requests).toContain('POST /collections/sparse/points/query');
    await sink.close();
  });
});

describe('QdrantStore against a server that accepts connections and never answers', () => {
  // A hung Qdrant (or a proxy in front of a dead one): the client aborts the request after its
  // timeout with an AbortError. That is a transient failure to retry and report as such, not an
  // INTERNAL error that ends an ingest at the first slow answer.
  it('reports the request timeout as TIMEOUT, which RetryingStore retries and ends as UNAVAILABLE', async () => {
    const sockets: Socket[] = [];
    const hung = createServer((socket) => {
      sockets.push(socket);
    });
    await new Promise<void>((resolve) => hung.listen(0, '127.0.0.1', resolve));
    const address = hung.address();
    const port = typeof address === 'object' && address !== null ? address.port : 0;
    try {
      const sink = new QdrantStore({ host: '127.0.0.1', port, collection: 'hung', requestTimeoutMs: 300 });
      await expect(sink.describe()).rejects.toMatchObject({ code: ErrorCode.TIMEOUT, message: expect.stringContaining('qdrant lookup') });
      const retrying = new RetryingStore(new QdrantStore({ host: '127.0.0.1', port, collection: 'hung', requestTimeoutMs: 300 }), 'qdrant', { baseDelayMs: 10, maxDelayMs: 20, maxElapsedMs: 1_000 });
      await expect(retrying.describe()).rejects.toMatchObject({ code: ErrorCode.UNAVAILABLE, message: expect.stringMatching(/still failing after [2-9]\d* attempts/) });
    } finally {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => hung.close(resolve));
    }
  }, 30_000);
});

