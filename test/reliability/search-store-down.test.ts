import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Engine } from '../../adapters/protocol/engine.js';
import { ErrorCode, ShoalError } from '../../adapters/protocol/errors.js';
import { openIndexUri } from '../../adapters/stores/open.js';
import { SEARCH_STORE_RETRY_MS, STORE_DOWN_MS } from '../../services/gateway/index-outages.js';
import { ErrorBody, localGateway } from '../helpers/gateway.js';
import { startPgliteServer, type PgliteServerHandle } from '../helpers/pglite-server.js';
import { unitVectors } from '../helpers/seeded-vectors.js';

/**
 * Issue 42 item 16 (store down). A search of an index whose store had stopped retried the store
 * for up to a minute: the caller was held until the gateway's deadline and got a 504. Now the
 * search retries the store for SEARCH_STORE_RETRY_MS and answers 503 UNAVAILABLE with Retry-After,
 * and for STORE_DOWN_MS afterwards searches of that index answer 503 at once. The store is a real
 * pgvector server (PGlite on the Postgres wire protocol) that the test halts.
 */

const DIMENSION = 8;
const TIMEOUT_MS = 15_000;

function stubEngine(): Engine {
  const refuse = (): never => {
    throw new ShoalError(ErrorCode.UNSUPPORTED_OPERATION, 'not in this test');
  };
  const [query] = unitVectors(1, DIMENSION, 3);
  return {
    encode: async (request) => ({ model: request.model, items: request.items.map((_item, index) => ({ index, dense: Array.from(query ?? []) })), usage: { items: request.items.length, tokens: 0 } }),
    score: refuse,
    extract: refuse,
    tokenize: refuse,
    close: async () => undefined,
  };
}

describe('search: a store that is down answers 503 fast, not 504 after the deadline', () => {
  let postgres: PgliteServerHandle;
  let app: FastifyInstance;

  beforeAll(async () => {
    postgres = await startPgliteServer();
    const target = `${postgres.url}?table=down_test`;
    const { store: sink } = openIndexUri(target);
    await sink.prepare({ dimension: DIMENSION, distance: 'cosine', optionalColumns: [], metadata: { model: 'encoder' } });
    const vectors = unitVectors(5, DIMENSION, 1);
    await sink.commit(
      vectors.map((vector, i) => ({ id: `r${i}`, document_id: `d${i}`, source: `s${i}`, page: 1, chunk: 0, text: `text ${i}`, start: 0, end: 6, heading: null, settings: 'x', vector, entities: null, labels: null, ingested_at: '2026-01-01T00:00:00Z' })),
      vectors.map((_vector, i) => ({ source: `s${i}`, document_id: `d${i}`, settings: 'x', chunks: 1, pages: 1, ingested_at: '2026-01-01T00:00:00Z' })),
    );
    await sink.close();
    app = localGateway(stubEngine(), { requestTimeoutMs: TIMEOUT_MS, indexes: { docs: target } });
  }, 60_000);

  afterAll(async () => {
    await app?.close();
    await postgres?.stop();
  });

  const search = () => app.inject({ method: 'POST', url: '/v1/search', payload: { query: 'boats', index: 'docs', k: 3 } });

  it('answers while the store is up, 503 with Retry-After within seconds once it stops, then 503 at once', async () => {
    const up = await search();
    expect(up.statusCode, up.body).toBe(200);

    await postgres.halt();
    let started = Date.now();
    const first = await search();
    const firstMs = Date.now() - started;
    expect(first.statusCode, first.body).toBe(503);
    expect(ErrorBody.parse(first.json()).error.code).toBe(ErrorCode.UNAVAILABLE);
    expect(Number(first.headers['retry-after'])).toBeGreaterThan(0);
    // The search's own retry bound plus slack for a busy machine, far below the deadline (504) it used to wait for.
    expect(firstMs).toBeLessThan(SEARCH_STORE_RETRY_MS + 4_000);

    started = Date.now();
    const second = await search();
    const secondMs = Date.now() - started;
    expect(second.statusCode).toBe(503);
    const body = ErrorBody.parse(second.json());
    expect(body.error.code).toBe(ErrorCode.UNAVAILABLE);
    expect(body.error.message).toMatch(/^the store of index docs is not answering/);
    expect(body.error.details).toMatchObject({ index: 'docs' });
    const retryAfter = Number(second.headers['retry-after']);
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(STORE_DOWN_MS / 1000);
    expect(secondMs).toBeLessThan(1_000);
  }, 60_000);
});
