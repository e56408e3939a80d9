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
import type { ChunkRow, DocumentState, Store, TableSpec } from '../../../../../adapters/stores/store.js';
import { startQdrantFake, type QdrantFakeHandle } from '../../../../helpers/qdrant-fake.js';

/**
 * `searchMultivector` where the store has multi-vectors natively (LanceDB's list-of-vectors
 * column, Qdrant's multivector with max_sim): MaxSim scores worked out here by hand, the id list
 * and the filter restrict the rows. The other backends refuse such a table at prepare time.
 */

const SPEC: TableSpec = { dimension: 2, distance: 'cosine', optionalColumns: ['multivector'], metadata: { model: 'm', multivector_model: 'c', multivector_dimension: '3' } };
const norm = (vector: number[]): number[] => vector.map((value) => value / Math.hypot(...vector));

function row(id: string, source: string, tokens: number[][]): ChunkRow {
  return {
    id, document_id: `d-${source}`, source, page: 1, chunk: Number(id.slice(1)), text: `text of ${id}`, start: 0, end: 9, heading: null, settings: 's',
    vector: [1, 0], entities: null, labels: null, ingested_at: '2026-01-01T00:00:00.000Z', multivector: tokens.map(norm),
  };
}
const state = (source: string, chunks: number): DocumentState => ({ source, document_id: `d-${source}`, settings: 's', chunks, pages: 1, ingested_at: '2026-01-01T00:00:00.000Z' });

const ROWS = [row('r0', 'a', [[1, 0, 0], [0, 1, 0]]), row('r1', 'a', [[0, 0, 1]]), row('r2', 'b', [[1, 1, 0], [0, 0, 1], [1, 0, 1]])];
const STATES = [state('a', 2), state('b', 1)];
const QUERY = [norm([1, 0, 0]), norm([0, 0, 1])];
/** MaxSim by hand: r2 = max(√½, 0, √½) + max(0, 1, √½) = 1 + √½; r0 = 1 + 0; r1 = 0 + 1 (tie with r0, ordered by id). */
const EXPECTED = [
  { id: 'r2', score: 1 + Math.SQRT1_2 },
  { id: 'r0', score: 1 },
  { id: 'r1', score: 1 },
];

let dir: string;
let qdrant: QdrantFakeHandle;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'shoal-multivector-sinks-'));
  qdrant = await startQdrantFake();
});
afterAll(async () => {
  await qdrant?.stop();
  await rm(dir, { recursive: true, force: true });
});

const NATIVE: readonly [string, (table: string) => Store][] = [
  ['lancedb', (table) => new LanceDbStore({ dir: join(dir, 'lance'), table })],
  ['qdrant', (table) => new QdrantStore({ host: '127.0.0.1', port: qdrant.port, collection: table })],
];

describe.each(NATIVE)('searchMultivector on %s', (_backend, open) => {
  it('ranks by MaxSim, restricted to the given ids and the filter', async () => {
    const sink = open('tokens');
    try {
      await sink.prepare(SPEC);
      await sink.commit(ROWS, STATES);
      const hits = await sink.searchMultivector(QUERY, { k: 10 });
      expect(hits.map((hit) => hit.row.id)).toEqual(EXPECTED.map((entry) => entry.id));
      hits.forEach((hit, i) => expect(hit.score).toBeCloseTo(EXPECTED[i]?.score ?? Number.NaN, 5));
      expect(hits[0]?.row).toMatchObject({ source: 'b', text: 'text of r2' });
      expect((await sink.searchMultivector(QUERY, { k: 10, ids: ['r1', 'r0'] })).map((hit) => hit.row.id)).toEqual(['r0', 'r1']);
      expect((await sink.searchMultivector(QUERY, { k: 10, ids: ['r2', 'r1'], filter: validateFilter("source = 'a'") })).map((hit) => hit.row.id)).toEqual(['r1']);
      expect(await sink.searchMultivector(QUERY, { k: 10, ids: [] })).toEqual([]);
      await expect(sink.searchMultivector([[1, 0, 0], [1, 0]], { k: 3 })).rejects.toMatchObject({ code: ErrorCode.INVALID_INPUT });
    } finally {
      await sink.close();
    }
  });
});

describe('multi-vectors elsewhere', () => {
  it('are refused at prepare time by pgvector, JSON Lines and Chroma, before anything is created', async () => {
    // Nothing listens on port 9: the refusals cannot have come from a server.
    const sinks: Store[] = [
      new PgVectorStore({ connection: { host: '127.0.0.1', port: 9, user: 'postgres', database: 'postgres', ssl: false }, connectTimeoutMs: 500 }),
      new JsonlStore({ dir: join(dir, 'jsonl') }),
      new ChromaStore({ host: '127.0.0.1', port: 9, collection: 'tokens' }),
    ];
    for (const sink of sinks) {
      await expect(sink.prepare(SPEC)).rejects.toMatchObject({ code: ErrorCode.UNSUPPORTED_OPERATION, message: expect.stringContaining('keeps no multi-vectors') });
      await expect(sink.searchMultivector(QUERY, { k: 3 })).rejects.toMatchObject({ code: ErrorCode.UNSUPPORTED_OPERATION });
      await sink.close();
    }
  });
});
