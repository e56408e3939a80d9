import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { validateFilter } from '../../../../../adapters/stores/shared/filter.js';
import { openIndexUri } from '../../../../../adapters/stores/open.js';
import type { ChunkRow, DocumentState, Store } from '../../../../../adapters/stores/store.js';
import { generator } from '../../../../fixtures/build/random.js';
import { startChromaServer, type ChromaServerHandle } from '../../../../helpers/chroma-server.js';
import { startPgliteServer, type PgliteServerHandle } from '../../../../helpers/pglite-server.js';
import { startQdrantFake, type QdrantFakeHandle } from '../../../../helpers/qdrant-fake.js';
import { unitVector } from '../../../../helpers/seeded-vectors.js';

/**
 * The same rows into every backend, opened by URI as `shoal ingest/search --index URI` opens
 * them: equal counts, a repeated commit adds nothing, and the same queries give the same top-10
 * ids (ties aside) and scores on LanceDB, pgvector (PGlite over the wire), Chroma (its own
 * server), Qdrant (the REST-contract server) and file://.
 */

const DIM = 32;
const ROWS = 400;
let root: string;
let pg: PgliteServerHandle;
let chroma: ChromaServerHandle;
let qdrant: QdrantFakeHandle;

/** Rows first, then queries, all from one seeded stream, so a failure reproduces. */
const next = generator(42);
const unit = (): number[] => Array.from(unitVector(next, DIM));
const rows: ChunkRow[] = Array.from({ length: ROWS }, (_, i) => ({
  id: `doc${Math.floor(i / 4)}:${i % 4}`, document_id: `h${Math.floor(i / 4)}`, source: `/corpus/doc${Math.floor(i / 4)}.txt`, page: 1 + (i % 3), chunk: i % 4,
  text: `chunk ${i}`, start: (i % 4) * 100, end: (i % 4) * 100 + 99, heading: null, settings: 'v1', vector: unit(), entities: null, labels: null, ingested_at: '2026-01-01T00:00:00Z',
}));
const states: DocumentState[] = Array.from({ length: ROWS / 4 }, (_, d) => ({ source: `/corpus/doc${d}.txt`, document_id: `h${d}`, settings: 'v1', chunks: 4, pages: 3, ingested_at: '2026-01-01T00:00:00Z' }));
const queries = Array.from({ length: 10 }, () => unit());

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'shoal-rankings-'));
  [pg, chroma, qdrant] = await Promise.all([startPgliteServer(), startChromaServer(), startQdrantFake()]);
}, 120_000);
afterAll(async () => {
  await Promise.all([pg?.stop(), chroma?.stop(), qdrant?.stop()]);
  await rm(root, { recursive: true, force: true });
});

describe('the same rows on every backend', () => {
  it('count alike, re-commit adds nothing, and rank alike', async () => {
    const uris = {
      lancedb: join(root, 'lance'),
      pgvector: `${pg.url}?table=rank`,
      chroma: `chroma://127.0.0.1:${chroma.port}/rank`,
      qdrant: `qdrant://127.0.0.1:${qdrant.port}/rank`,
      file: `file://${join(root, 'jsonl')}`,
    };
    const results = new Map<string, { ids: string[][]; scores: number[][]; filtered: string[] }>();
    for (const [name, uri] of Object.entries(uris)) {
      const { store: sink }: { store: Store } = openIndexUri(uri, { batchRows: 128 });
      await sink.prepare({ dimension: DIM, distance: 'cosine', optionalColumns: [], metadata: { model: 'random' } });
      await sink.commit(rows, states);
      await sink.commit(rows, states);
      expect(await sink.count(), name).toBe(ROWS);
      expect(await sink.count(validateFilter('chunk = 0')), name).toBe(ROWS / 4);
      const ids: string[][] = [];
      const scores: number[][] = [];
      for (const query of queries) {
        const hits = await sink.search(query, { k: 10 });
        ids.push(hits.map((hit) => hit.row.id));
        scores.push(hits.map((hit) => hit.score));
      }
      const filtered = (await sink.search(queries[0] ?? [], { k: 10, filter: validateFilter('page = 2 AND chunk IN (1, 3)') })).map((hit) => hit.row.id);
      results.set(name, { ids, scores, filtered });
      await sink.close();
    }
    const reference = results.get('lancedb');
    expect(reference?.ids.flat()).toHaveLength(100);
    for (const [name, result] of results) {
      result.ids.forEach((ids, q) => {
        const want = reference?.ids[q] ?? [];
        const wantScores = reference?.scores[q] ?? [];
        expect(ids, `${name} query ${q}`).toHaveLength(10);
        ids.forEach((id, at) => {
          const score = result.scores[q]?.[at] ?? Number.NaN;
          expect(score, `${name} query ${q} rank ${at + 1}`).toBeCloseTo(wantScores[at] ?? Number.NaN, 4);
          // Another id at this rank only in a tie: its score equals the reference's within float32 noise.
          if (id !== want[at]) expect(Math.abs(score - (wantScores[at] ?? Number.NaN)), `${name} query ${q} rank ${at + 1}: ${id} vs ${want[at]}`).toBeLessThan(1e-5);
        });
      });
      expect(result.filtered, name).toEqual(reference?.filtered);
      expect(result.filtered.every((id) => rows.find((row) => row.id === id)?.page === 2)).toBe(true);
    }
  }, 60_000);
});
