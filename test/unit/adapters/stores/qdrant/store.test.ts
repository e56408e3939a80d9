import { createServer, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ErrorCode } from '../../../../../adapters/protocol/errors.js';
import { RetryingStore } from '../../../../../adapters/stores/shared/delivery.js';
import { pointId, QdrantStore } from '../../../../../adapters/stores/qdrant/store.js';
import { startQdrantFake, type QdrantFakeHandle } from '../../../../helpers/qdrant-fake.js';

/**
 * The Qdrant store, beyond the shared contract (test/conformance/stores.test.ts). No Qdrant
 * server can run on these machines: it is tested against test/helpers/qdrant-fake.ts, a loopback
 * HTTP server implementing Qdrant's documented REST contract for the calls the sink makes
 * (README: "Vector databases").
 */

let server: QdrantFakeHandle;
beforeAll(async () => {
  server = await startQdrantFake();
});
afterAll(async () => server?.stop());

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

