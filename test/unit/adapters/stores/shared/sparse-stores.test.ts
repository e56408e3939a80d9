import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ErrorCode } from '../../../../../adapters/protocol/errors.js';
import { ChromaStore } from '../../../../../adapters/stores/chroma/store.js';
import { validateFilter } from '../../../../../adapters/stores/shared/filter.js';
import { JsonlStore } from '../../../../../adapters/stores/file/store.js';
import { LanceDbStore } from '../../../../../adapters/stores/lancedb/store.js';
import { PgVectorStore } from '../../../../../adapters/stores/pgvector/store.js';
import { QdrantStore } from '../../../../../adapters/stores/qdrant/store.js';
import { S3JsonStore } from '../../../../../adapters/stores/s3/store.js';
import { S3Store } from '../../../../../adapters/object-store/index.js';
import type { ChunkRow, DocumentState, Store, SparseValues, TableSpec } from '../../../../../adapters/stores/store.js';
import { SPARSE_DIMENSION } from '../../../../../adapters/stores/shared/sparse.js';
import { startPgliteServer, type PgliteServerHandle } from '../../../../helpers/pglite-server.js';
import { startQdrantFake, type QdrantFakeHandle } from '../../../../helpers/qdrant-fake.js';
import { startS3Server, type S3ServerHandle } from '../../../../helpers/s3-server.js';

/**
 * `searchSparse` on every backend that keeps sparse vectors (LanceDB list columns, pgvector
 * `sparsevec`, Qdrant's named sparse vector, JSON Lines, S3): the same rows give the same ids, order
 * and scores, the scores being dot products worked out here by hand; rows without a sparse vector
 * or sharing no term are left out; filters apply. Chroma refuses a sparse table before creating it.
 */

const SPEC: TableSpec = { dimension: 2, distance: 'cosine', optionalColumns: ['sparse'], metadata: { model: 'm', sparse_model: 's' } };
const sparse = (terms: Record<number, number>): SparseValues => {
  const indices = Object.keys(terms).map(Number).sort((a, b) => a - b);
  return { indices, values: indices.map((index) => terms[index] ?? 0), dimension: SPARSE_DIMENSION };
};

function row(id: string, source: string, terms: Record<number, number> | null): ChunkRow {
  return {
    id, document_id: `d-${source}`, source, page: 1, chunk: Number(id.slice(1)), text: `text of ${id}`, start: 0, end: 9, heading: null, settings: 's',
    vector: [1, 0], entities: null, labels: null, ingested_at: '2026-01-01T00:00:00.000Z', sparse: terms === null ? null : sparse(terms),
  };
}
const state = (source: string, chunks: number): DocumentState => ({ source, document_id: `d-${source}`, settings: 's', chunks, pages: 1, ingested_at: '2026-01-01T00:00:00.000Z' });

// Term 999_999 is past BERT's vocabulary: the shared term-id space takes any id below SPARSE_DIMENSION.
const ROWS = [
  row('r0', 'a', { 3: 0.5, 17: 1.25 }),
  row('r1', 'a', { 17: 2, 999_999: 0.75 }),
  row('r2', 'b', { 3: 4 }),
  row('r3', 'b', { 8: 9 }),
  row('r4', 'c', null),
];
const STATES = [state('a', 2), state('b', 2), state('c', 1)];
const QUERY = sparse({ 3: 0.5, 17: 1, 999_999: 2 });
/** Σ query·row by hand: r0 = 0.5·0.5 + 1·1.25, r1 = 1·2 + 2·0.75, r2 = 0.5·4; r3 shares no term, r4 has no vector. */
const EXPECTED = [
  { id: 'r1', score: 3.5 },
  { id: 'r2', score: 2 },
  { id: 'r0', score: 1.5 },
];

let dir: string;
let pglite: PgliteServerHandle;
let qdrant: QdrantFakeHandle;
let s3: S3ServerHandle;
let store: S3Store;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'shoal-sparse-sinks-'));
  [pglite, qdrant, s3] = await Promise.all([startPgliteServer(), startQdrantFake(), startS3Server(['sparse'])]);
  store = new S3Store(s3.settings());
}, 60_000);
afterAll(async () => {
  store?.close();
  await Promise.all([pglite?.stop(), qdrant?.stop(), s3?.stop()]);
  await rm(dir, { recursive: true, force: true });
});

const BACKENDS: readonly [string, (table: string) => Store][] = [
  ['lancedb', (table) => new LanceDbStore({ dir: join(dir, 'lance'), table })],
  ['jsonl', (table) => new JsonlStore({ dir: join(dir, 'jsonl'), table })],
  ['pgvector', (table) => new PgVectorStore({ connection: { host: '127.0.0.1', port: pglite.port, user: 'postgres', database: 'postgres', ssl: false }, table })],
  ['qdrant', (table) => new QdrantStore({ host: '127.0.0.1', port: qdrant.port, collection: table })],
  ['s3', (table) => new S3JsonStore({ uri: 's3://sparse/index', table, store })],
];

describe.each(BACKENDS)('searchSparse on %s', (_backend, open) => {
  it('ranks by dot product with the same scores as every other backend, leaves out rows without a shared term, and filters', async () => {
    const sink = open('sparse');
    try {
      await sink.prepare(SPEC);
      await sink.commit(ROWS, STATES);
      expect(await sink.describe()).toMatchObject({ optionalColumns: ['sparse'], metadata: { sparse_model: 's' } });
      const hits = await sink.searchSparse(QUERY, { k: 10 });
      expect(hits.map((hit) => ({ id: hit.row.id, score: hit.score }))).toEqual(EXPECTED);
      expect(hits[0]?.row).toMatchObject({ source: 'a', text: 'text of r1', page: 1, chunk: 1 });
      expect((await sink.searchSparse(QUERY, { k: 1 })).map((hit) => hit.row.id)).toEqual(['r1']);
      const filtered = await sink.searchSparse(QUERY, { k: 10, filter: validateFilter("source = 'b' OR chunk = 0") });
      expect(filtered.map((hit) => hit.row.id)).toEqual(['r2', 'r0']);
      // Rewritten with other weights: the upsert replaces the stored sparse vector.
      await sink.commit([row('r3', 'b', { 3: 10 }), ROWS[2] as ChunkRow], [state('b', 2)]);
      expect((await sink.searchSparse(QUERY, { k: 10 })).map((hit) => ({ id: hit.row.id, score: hit.score }))).toEqual([{ id: 'r3', score: 5 }, ...EXPECTED]);
    } finally {
      await sink.close();
    }
  });

  it('refuses a malformed query', async () => {
    const sink = open('sparse');
    try {
      await expect(sink.searchSparse({ indices: [1, 2], values: [1], dimension: SPARSE_DIMENSION }, { k: 3 })).rejects.toMatchObject({ code: ErrorCode.INVALID_INPUT });
      await expect(sink.searchSparse(QUERY, { k: 0 })).rejects.toMatchObject({ code: ErrorCode.INVALID_INPUT });
    } finally {
      await sink.close();
    }
  });
});

describe('sparse vectors on Chroma', () => {
  it('are refused at prepare time, before any collection is created', async () => {
    // Port 9 (discard): nothing answers there, so the refusal cannot have come from a server.
    const sink = new ChromaStore({ host: '127.0.0.1', port: 9, collection: 'sparse' });
    await expect(sink.prepare(SPEC)).rejects.toMatchObject({ code: ErrorCode.UNSUPPORTED_OPERATION, message: expect.stringContaining('keeps no sparse vectors') });
    await expect(sink.searchSparse(QUERY, { k: 3 })).rejects.toMatchObject({ code: ErrorCode.UNSUPPORTED_OPERATION });
    await sink.close();
  });
});
