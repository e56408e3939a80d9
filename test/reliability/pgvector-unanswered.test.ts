import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ErrorCode, ShoalError } from '../../adapters/protocol/errors.js';
import { openIndexUri } from '../../adapters/stores/open.js';
import type { Store } from '../../adapters/stores/store.js';
import { startFreezingRelay, type FreezingRelay } from '../helpers/freezing-relay.js';
import { startPgliteServer, type PgliteServerHandle } from '../helpers/pglite-server.js';
import { unitVectors } from '../helpers/seeded-vectors.js';

/**
 * A PostgreSQL connection that stops answering (a reply lost on the way: a stuck server, a
 * middlebox, a half-open TCP connection) used to hold the pgvector store's caller for ever: seen
 * in the documents cluster test, where PGlite's socket server lost the answer to a `BEGIN` and a
 * documents worker's batch waited on it, keeping its 64 jobs (their ack wait extended while it
 * worked) until the test's 300 s ran out. Now a query waits at most `query_timeout` (URI, ms;
 * default 60 s, SHOAL_STORE_TIMEOUT_MS) and fails UNAVAILABLE (retried like any outage), and its connection is dropped,
 * so the next call works on a fresh one. The store is PGlite behind a TCP relay the test freezes.
 */

const DIMENSION = 8;
const QUERY_TIMEOUT_MS = 800;

describe('pgvector: a query whose answer never comes fails UNAVAILABLE after query_timeout', () => {
  let postgres: PgliteServerHandle;
  let relay: FreezingRelay;
  let store: Store;

  beforeAll(async () => {
    postgres = await startPgliteServer();
    relay = await startFreezingRelay(postgres.port);
    // One attempt per call (the store's outage retries would only repeat the wait here).
    store = openIndexUri(relay.url(`?table=unanswered&query_timeout=${QUERY_TIMEOUT_MS}`), { retry: { maxElapsedMs: 0 } }).store;
    await store.prepare({ dimension: DIMENSION, distance: 'cosine', optionalColumns: [], metadata: { model: 'encoder' } });
  }, 60_000);

  afterAll(async () => {
    await store?.close();
    await relay?.stop();
    await postgres?.stop();
  });

  const commit = (ids: readonly number[]): Promise<void> => {
    const vectors = unitVectors(ids.length, DIMENSION, ids[0] ?? 1);
    return store.commit(
      ids.map((i, k) => ({ id: `r${i}`, document_id: `d${i}`, source: `s${i}`, page: 1, chunk: 0, text: `text ${i}`, start: 0, end: 6, heading: null, settings: 'x', vector: vectors[k] ?? [], entities: null, labels: null, ingested_at: '2026-01-01T00:00:00Z' })),
      ids.map((i) => ({ source: `s${i}`, document_id: `d${i}`, settings: 'x', chunks: 1, pages: 1, ingested_at: '2026-01-01T00:00:00Z' })),
    );
  };

  it('a transaction and a plain query each end within the timeout, then the store works again', async () => {
    await commit([1, 2]);
    // Two open connections, so that each call below runs on one (a new connection's handshake would wait out the connect timeout instead).
    expect(await Promise.all([store.count(), store.count()])).toEqual([2, 2]);

    relay.freeze();
    // A commit is a transaction (BEGIN first: the statement whose answer was lost in the cluster test).
    let started = Date.now();
    const lost = await commit([3]).then(() => null, (error: unknown) => error);
    expect(lost).toBeInstanceOf(ShoalError);
    expect((lost as ShoalError).code).toBe(ErrorCode.UNAVAILABLE);
    expect((lost as ShoalError).message).toMatch(/Query read timeout/);
    // One timeout (no ROLLBACK queued behind the unanswered statement), plus slack for a busy machine.
    expect(Date.now() - started).toBeLessThan(QUERY_TIMEOUT_MS + 4_000);

    started = Date.now();
    const counted = await store.count().then(() => null, (error: unknown) => error);
    expect((counted as ShoalError).code).toBe(ErrorCode.UNAVAILABLE);
    expect(Date.now() - started).toBeLessThan(QUERY_TIMEOUT_MS + 4_000);

    relay.thaw();
    // The stuck connections were dropped: fresh ones answer, and the lost commit never landed.
    expect(await store.count()).toBe(2);
    await commit([3]);
    expect(await store.count()).toBe(3);
  }, 60_000);

  it('without query_timeout in the URI, SHOAL_STORE_TIMEOUT_MS (the store credentials) bounds the wait', async () => {
    const other = openIndexUri(relay.url('?table=unanswered'), { retry: { maxElapsedMs: 0 }, credentials: { storeTimeoutMs: QUERY_TIMEOUT_MS } }).store;
    try {
      expect(await other.count()).toBe(3);
      relay.freeze();
      const started = Date.now();
      const lost = await other.count().then(() => null, (error: unknown) => error);
      expect((lost as ShoalError).code).toBe(ErrorCode.UNAVAILABLE);
      expect(Date.now() - started).toBeLessThan(QUERY_TIMEOUT_MS + 4_000);
    } finally {
      relay.thaw();
      await other.close();
    }
  }, 60_000);

  it('query_timeout must be a whole number of milliseconds from 100 to a day', () => {
    expect(() => openIndexUri(relay.url('?table=t&query_timeout=50'))).toThrow(/query_timeout/);
    expect(() => openIndexUri(relay.url('?table=t&query_timeout=soon'))).toThrow(/query_timeout/);
  });
});
