import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ErrorCode } from '../../../../../adapters/protocol/errors.js';
import { ShoalMetrics } from '../../../../../adapters/observability/metrics.js';
import { RetryingStore } from '../../../../../adapters/stores/shared/delivery.js';
import { validateFilter } from '../../../../../adapters/stores/shared/filter.js';
import { PgVectorStore } from '../../../../../adapters/stores/pgvector/store.js';
import type { ChunkRow, DocumentState } from '../../../../../adapters/stores/store.js';
import { fromFloat16Bits, toFloat16Bits } from '../../../../../adapters/protocol/output-types.js';
import { startPgliteServer, type PgliteServerHandle } from '../../../../helpers/pglite-server.js';

/**
 * The pgvector store through the production `pg` driver against PostgreSQL+pgvector (PGlite) on a
 * loopback port, beyond the shared contract (test/conformance/stores.test.ts).
 */

let server: PgliteServerHandle;
beforeAll(async () => {
  server = await startPgliteServer();
}, 60_000);
afterAll(async () => server?.stop());

const connection = (): ConstructorParameters<typeof PgVectorStore>[0]['connection'] => ({ host: '127.0.0.1', port: server.port, user: 'postgres', database: 'postgres', ssl: false });

/** One statement through a plain `pg` client (not the sink). */
async function sql<R extends pg.QueryResultRow>(text: string, params: unknown[] = []): Promise<R[]> {
  const client = new pg.Client({ ...connection(), ssl: false });
  await client.connect();
  try {
    return (await client.query<R>(text, params)).rows;
  } finally {
    await client.end();
  }
}

describe('PgVectorStore', () => {
  it('stores sparse vectors and builds the HNSW index past the threshold', async () => {
    const sink = new PgVectorStore({ connection: connection(), table: 'hnsw', vectorIndexMinRows: 50, batchRows: 16, hnswM: 12, hnswEfConstruction: 40 });
    await sink.prepare({ dimension: 8, distance: 'l2', optionalColumns: [], metadata: {} });
    const vector = (i: number): number[] => Array.from({ length: 8 }, (_, d) => Math.sin(i * 0.7 + d));
    const rows = Array.from({ length: 60 }, (_, i) => ({
      id: `r${i}`, document_id: `d${i}`, source: `s${i}`, page: 1, chunk: 0, text: `row ${i}`, start: 0, end: 5, heading: null, settings: 's',
      vector: vector(i), entities: null, labels: null, ingested_at: 'now', sparse: { indices: [1, 5], values: [0.5, i], dimension: 30_000 },
    }));
    await sink.commit(rows, rows.map((row) => ({ source: row.source, document_id: row.document_id, settings: 's', chunks: 1, pages: 1, ingested_at: 'now' })));
    await sink.optimize();
    const [hit] = await sink.search(vector(17), { k: 1 });
    expect(hit?.row.id).toBe('r17');
    expect(hit?.score).toBeCloseTo(0, 5);
    const pg = await import('pg');
    const client = new pg.default.Client({ host: '127.0.0.1', port: server.port, user: 'postgres', database: 'postgres' });
    await client.connect();
    const indexes = await client.query("SELECT indexdef FROM pg_indexes WHERE tablename = 'hnsw'");
    // Built with the store's build parameters (the URI's hnsw_m, hnsw_ef_construction).
    expect(indexes.rows.map((r: { indexdef: string }) => r.indexdef).join('\n')).toMatch(/USING hnsw \(vector vector_l2_ops\) WITH \(m='?12'?, ef_construction='?40'?\)/);
    const sparse = await client.query("SELECT sparse::text AS s FROM hnsw WHERE id = 'r3'");
    expect(sparse.rows[0]).toEqual({ s: '{2:0.5,6:3}/30000' });
    await client.end();
    await sink.close();
  });

  it('a commit while PostgreSQL is down is retried until it is back, counted once, with its metric; past the bound it fails clearly', async () => {
    const metrics = new ShoalMetrics({ processMetrics: false });
    const sink = new RetryingStore(new PgVectorStore({ connection: connection(), table: 'outage', connectTimeoutMs: 1_000 }), 'pgvector', { baseDelayMs: 50, maxDelayMs: 200, maxElapsedMs: 20_000 }, metrics.sinkObserver);
    await sink.prepare({ dimension: 2, distance: 'cosine', optionalColumns: [], metadata: {} });
    const row = { id: 'o1', document_id: 'd', source: 'o', page: 1, chunk: 0, text: 't', start: 0, end: 1, heading: null, settings: 's', vector: [1, 0], entities: null, labels: null, ingested_at: 'now' };
    const state = { source: 'o', document_id: 'd', settings: 's', chunks: 1, pages: 1, ingested_at: 'now' };
    await server.halt();
    const committing = sink.commit([row], [state]);
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    await server.start();
    await committing;
    expect(await sink.count()).toBe(1);
    expect((await sink.states(['o'])).get('o')).toMatchObject({ chunks: 1 });
    const text = (await metrics.render()).body;
    expect(text).toMatch(/shoal_sink_writes_total\{backend="pgvector",outcome="ok"\} 1/);
    expect(text).toMatch(/shoal_sink_writes_total\{backend="pgvector",outcome="retry"\} [1-9]/);
    expect(text).toMatch(/shoal_sink_write_seconds_count\{backend="pgvector"\} 1/);
    await sink.close();

    const bounded = new RetryingStore(new PgVectorStore({ connection: connection(), table: 'outage', connectTimeoutMs: 500 }), 'pgvector', { baseDelayMs: 50, maxDelayMs: 100, maxElapsedMs: 600 }, metrics.sinkObserver);
    await server.halt();
    try {
      await expect(bounded.commit([{ ...row, id: 'o2' }], [state])).rejects.toMatchObject({ code: ErrorCode.UNAVAILABLE, message: expect.stringMatching(/pgvector write: still failing after \d+ attempts/) });
    } finally {
      await server.start();
    }
    expect((await metrics.render()).body).toMatch(/shoal_sink_writes_total\{backend="pgvector",outcome="failed"\} 1/);
    expect(await bounded.count()).toBe(1);
    await bounded.close();
  }, 30_000);
});

describe('PgVectorStore on a database that already has a table of that name', () => {
  // `?table=documents` on an application's database: CREATE TABLE IF NOT EXISTS kept the
  // application's table, the spec was recorded beside it, and every commit then failed with
  // INTERNAL column errors (each run after all its parsing and encoding), the spec left behind.
  it('refuses it with CONFIG_INVALID before writing anything, and leaves it as it was', async () => {
    await sql('CREATE TABLE app_documents (id serial PRIMARY KEY, title text)');
    await sql("INSERT INTO app_documents (title) VALUES ('kept')");
    const sink = new PgVectorStore({ connection: connection(), table: 'app_documents' });
    try {
      await expect(sink.prepare({ dimension: 3, distance: 'cosine', optionalColumns: [], metadata: {} })).rejects.toMatchObject({
        code: ErrorCode.CONFIG_INVALID,
        message: expect.stringContaining('not created by shoal ingest'),
      });
    } finally {
      await sink.close();
    }
    expect(await sql<{ title: string }>('SELECT title FROM app_documents')).toEqual([{ title: 'kept' }]);
    expect(await sql<{ found: string | null }>("SELECT to_regclass('app_documents__spec')::text AS found")).toEqual([{ found: null }]);
    // Shoal's own state table alone (a first run whose documents gave no rows) is no such table.
    const later = new PgVectorStore({ connection: connection(), table: 'rows_later' });
    try {
      await later.commit([], [{ source: 'blank.txt', document_id: 'd0', settings: 's', chunks: 0, pages: 1, ingested_at: 'now' }]);
      await later.prepare({ dimension: 3, distance: 'cosine', optionalColumns: [], metadata: {} });
      expect(await later.describe()).toMatchObject({ dimension: 3 });
    } finally {
      await later.close();
    }
  });
});

describe('PgVectorStore output types', () => {
  it('builds the HNSW index with the operator class of a halfvec or bit column, and searches through it', async () => {
    const bits = (i: number): number[] => [i * 37 % 256, i * 91 % 256, i * 13 % 256];
    for (const [type, ops, vectorOf] of [
      ['float16', 'halfvec_cosine_ops', (i: number) => [Math.cos(i), Math.sin(i), 0.5]],
      ['ubinary', 'bit_hamming_ops', bits],
    ] as const) {
      const table = `hnsw_${type}`;
      const sink = new PgVectorStore({ connection: connection(), table, vectorIndexMinRows: 20 });
      await sink.prepare({ dimension: 3, distance: 'cosine', vectorType: type, optionalColumns: [], metadata: {} });
      // Half values (cos/sin rounded to half precision as the engine would) or packed bytes.
      const rows = Array.from({ length: 30 }, (_, i) => ({
        id: `r${i}`, document_id: `d${i}`, source: `s${i}`, page: 1, chunk: 0, text: `row ${i}`, start: 0, end: 5, heading: null, settings: 's',
        vector: type === 'float16' ? vectorOf(i).map((x) => fromFloat16Bits(toFloat16Bits(x))) : vectorOf(i), entities: null, labels: null, ingested_at: 'now',
      }));
      await sink.commit(rows, rows.map((row) => ({ source: row.source, document_id: row.document_id, settings: 's', chunks: 1, pages: 1, ingested_at: 'now' })));
      await sink.optimize();
      const indexes = await sql<{ indexdef: string }>('SELECT indexdef FROM pg_indexes WHERE tablename = $1', [table]);
      expect(indexes.some((index) => index.indexdef.includes(`hnsw (vector ${ops})`)), type).toBe(true);
      const [hit] = await sink.search(rows[7]?.vector ?? [], { k: 1 });
      expect(hit?.row.id, type).toBe('r7');
      expect(hit?.score, type).toBeCloseTo(1, 3);
      await sink.close();
    }
  });
});

describe('PgVectorStore metadata on a table made before metadata', () => {
  it('searches it as before, refuses a metadata filter until written, then adds the column in place on the first write', async () => {
    const table = 'before_metadata';
    const row = (source: string, vector: number[], metadata: ChunkRow['metadata']): ChunkRow => ({
      id: `${source}:0`, document_id: `d-${source}`, source, page: 1, chunk: 0, text: source, start: 0, end: 1, heading: null, settings: 's',
      vector, entities: null, labels: null, ingested_at: '2026-01-01T00:00:00.000Z', metadata,
    });
    const state = (source: string): DocumentState => ({ source, document_id: `d-${source}`, settings: 's', chunks: 1, pages: 1, ingested_at: '2026-01-01T00:00:00.000Z' });
    const first = new PgVectorStore({ connection: connection(), table });
    await first.prepare({ dimension: 2, distance: 'cosine', optionalColumns: [], metadata: {} });
    await first.commit([row('a', [1, 0], null)], [state('a')]);
    await first.close();
    // What an earlier Shoal made: the same table without the column.
    await sql(`ALTER TABLE "${table}" DROP COLUMN metadata`);

    const reader = new PgVectorStore({ connection: connection(), table });
    expect((await reader.search([1, 0], { k: 5 })).map((hit) => [hit.row.source, hit.row.metadata])).toEqual([['a', null]]);
    await expect(reader.search([1, 0], { k: 5, filter: validateFilter('metadata.year = 2020') })).rejects.toMatchObject({ code: ErrorCode.INVALID_INPUT, message: expect.stringContaining('holds no document metadata yet') });
    await reader.close();

    const writer = new PgVectorStore({ connection: connection(), table });
    await writer.prepare({ dimension: 2, distance: 'cosine', optionalColumns: [], metadata: {} });
    await writer.commit([row('b', [0, 1], { year: 2020, tags: ['x'] })], [state('b')]);
    expect((await writer.search([0, 1], { k: 5, filter: validateFilter("metadata.year = 2020 AND metadata.tags = 'x'") })).map((hit) => [hit.row.source, hit.row.metadata])).toEqual([['b', { year: 2020, tags: ['x'] }]]);
    await writer.close();
    expect(await sql<{ data_type: string }>("SELECT data_type FROM information_schema.columns WHERE table_name = $1 AND column_name = 'metadata'", [table])).toEqual([{ data_type: 'jsonb' }]);
  }, 60_000);
});
