import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openIndexUri } from '../../../../../adapters/stores/open.js';
import type { ChunkRow, Distance, DocumentState } from '../../../../../adapters/stores/store.js';
import { candidateCount, rankExactly, scoreOf } from '../../../../../adapters/stores/shared/table-spec.js';
import { generator } from '../../../../fixtures/build/random.js';
import { startChromaServer, type ChromaServerHandle } from '../../../../helpers/chroma-server.js';
import { startPgliteServer, type PgliteServerHandle } from '../../../../helpers/pglite-server.js';
import { startQdrantFake, type QdrantFakeHandle } from '../../../../helpers/qdrant-fake.js';
import { unitVector } from '../../../../helpers/seeded-vectors.js';

/**
 * Every backend ranks its over-fetched candidates with one exact function (`rankExactly`), so
 * its top k is the brute-force top k of the rows: the same ids in the same order (equal scores
 * by id) and the very same scores, also where the store's own search is approximate (Chroma's
 * HNSW) or computed in float32 (pgvector, LanceDB). Chroma and Qdrant normalise cosine vectors
 * when they store them (in float32), so their cosine scores agree within float32 rounding
 * (1e-10 here), not to the bit.
 */

const DIM = 48;
const ROWS = 800;
const next = generator(7);
const unit = (): number[] => Array.from(unitVector(next, DIM));
const base = Array.from({ length: ROWS }, () => unit());
// Every 50th row twice under another id: exact ties, which the stores order as they like.
const vectors = base.flatMap((vector, i) => (i % 50 === 0 ? [vector, vector] : [vector]));
const rows: ChunkRow[] = vectors.map((vector, i) => ({
  id: `r${String(i).padStart(5, '0')}`, document_id: `d${i}`, source: `/s/${i}`, page: 1, chunk: 0, text: `row ${i}`, start: 0, end: 6,
  heading: null, settings: 'v1', vector, entities: null, labels: null, ingested_at: '2026-01-01T00:00:00Z',
}));
const states: DocumentState[] = rows.map((row) => ({ source: row.source, document_id: row.document_id, settings: 'v1', chunks: 1, pages: 1, ingested_at: row.ingested_at }));
// Queries next to the duplicated rows put the ties in the top 10.
const queries = [...Array.from({ length: 6 }, (_, q) => base[q * 50]?.map((x) => x + (next() - 0.5) * 0.02) ?? []), ...Array.from({ length: 8 }, () => unit())];

/** The top k by scanning every row. */
function bruteForce(distance: Distance, query: readonly number[], k: number): { id: string; score: number }[] {
  return rankExactly(distance, query, rows.map((row) => ({ row, vector: row.vector })), k).map(({ row, score }) => ({ id: row.id, score }));
}

describe('rankExactly', () => {
  it('scores float32 values, whatever decimal form they arrive in, and orders equal scores by id', () => {
    const stored = Float32Array.from([0.1, -0.3, 0.7]);
    // pgvector and Chroma print each float32 as its shortest decimal: it parses to another float64.
    const printed = Array.from(stored, (x) => Number(Math.fround(x).toPrecision(9)));
    const shortest = [0.1, -0.3, 0.7];
    for (const distance of ['cosine', 'l2', 'dot'] as const) {
      expect(scoreOf(distance, [0.2, 0.5, -0.1], shortest)).toBe(scoreOf(distance, [0.2, 0.5, -0.1], stored));
      expect(scoreOf(distance, [0.2, 0.5, -0.1], printed)).toBe(scoreOf(distance, [0.2, 0.5, -0.1], stored));
    }
    const ranked = rankExactly('dot', [1, 0, 0], [
      { row: { id: 'b' }, vector: [0.5, 0, 0] },
      { row: { id: 'c' }, vector: [0.9, 0, 0] },
      { row: { id: 'a' }, vector: [0.5, 1, 0] },
    ], 2);
    expect(ranked.map(({ row, score }) => [row.id, score])).toEqual([['c', Math.fround(0.9)], ['a', 0.5]]);
  });

  it('asks for max(4k, 100) candidates', () => {
    expect([1, 10, 25, 26, 1_000].map(candidateCount)).toEqual([100, 100, 100, 104, 4_000]);
  });
});

describe('every backend gives the brute-force top k', () => {
  let root: string;
  let pg: PgliteServerHandle;
  let chroma: ChromaServerHandle;
  let qdrant: QdrantFakeHandle;

  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), 'shoal-exact-'));
    [pg, chroma, qdrant] = await Promise.all([startPgliteServer(), startChromaServer(), startQdrantFake()]);
  }, 120_000);
  afterAll(async () => {
    await Promise.all([pg?.stop(), chroma?.stop(), qdrant?.stop()]);
    await rm(root, { recursive: true, force: true });
  });

  it.each(['cosine', 'l2'] as const)('%s: same ids, order and scores as a scan of every row', async (distance) => {
    const uris = {
      lancedb: `lancedb://${join(root, 'lance')}?table=${distance}`,
      pgvector: `${pg.url}?table=exact_${distance}`,
      chroma: `chroma://127.0.0.1:${chroma.port}/exact-${distance}`,
      qdrant: `qdrant://127.0.0.1:${qdrant.port}/exact-${distance}`,
      file: `file://${join(root, 'jsonl')}?table=${distance}`,
    };
    const want = queries.map((query) => bruteForce(distance, query, 10));
    // The duplicated rows do reach the top 10 (both copies, by id).
    expect(want.filter((top) => top.some((hit, at) => top[at + 1]?.score === hit.score)).length).toBeGreaterThan(0);
    for (const [name, uri] of Object.entries(uris)) {
      const { store: sink } = openIndexUri(uri, { batchRows: 500 });
      try {
        await sink.prepare({ dimension: DIM, distance, optionalColumns: [], metadata: {} });
        await sink.commit(rows, states);
        for (const [q, query] of queries.entries()) {
          const got = (await sink.search(query, { k: 10 })).map((hit) => ({ id: hit.row.id, score: hit.score }));
          const expected = want[q] ?? [];
          expect(got.map((hit) => hit.id), `${name} ${distance} query ${q}`).toEqual(expected.map((hit) => hit.id));
          if ((name === 'qdrant' || name === 'chroma') && distance === 'cosine') {
            // Qdrant and Chroma keep cosine vectors normalised (and return them so): the same cosine up to the last bits.
            got.forEach((hit, at) => expect(hit.score).toBeCloseTo(expected[at]?.score ?? Number.NaN, 6));
          } else {
            expect(got.map((hit) => hit.score), `${name} ${distance} query ${q}`).toEqual(expected.map((hit) => hit.score));
          }
        }
      } finally {
        await sink.close();
      }
    }
  }, 240_000);
});
