import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Engine } from '../../../../adapters/protocol/engine.js';
import { ErrorCode, ShoalError } from '../../../../adapters/protocol/errors.js';
import { LanceDbStore } from '../../../../adapters/stores/lancedb/store.js';
import type { ChunkRow, DocumentState, SearchHit, SearchOptions } from '../../../../adapters/stores/store.js';
import { groupPool, searchDocuments } from '../../../../pipelines/documents/search-groups.js';

/**
 * `--group-by document` counts documents: when the best chunks of a search all come from a few
 * documents, the pool of ranked chunks is widened (×4) until k documents are found or the store
 * has no more matches. Text mode over a real LanceDB table, so no encoder is involved (the engine
 * here refuses every call).
 */

const AT = '2026-01-01T00:00:00.000Z';
const row = (id: string, source: string, chunk: number, text: string): ChunkRow => ({
  id, document_id: `d-${source}`, source, page: 1, chunk, text, start: chunk * 100, end: chunk * 100 + text.length, heading: null, settings: 's', vector: [1, 0], entities: null, labels: null, ingested_at: AT,
});
const state = (source: string, chunks: number): DocumentState => ({ source, document_id: `d-${source}`, settings: 's', chunks, pages: 1, ingested_at: AT });

/** Records the k of every text search it is asked. */
class CountingStore extends LanceDbStore {
  readonly asked: number[] = [];
  override searchText(query: string, options: SearchOptions): Promise<SearchHit[]> {
    this.asked.push(options.k);
    return super.searchText(query, options);
  }
}

const refusing: Engine = {
  encode: () => Promise.reject(new ShoalError(ErrorCode.INTERNAL, 'text mode encodes nothing')),
  score: () => Promise.reject(new ShoalError(ErrorCode.INTERNAL, 'no rerank here')),
  extract: () => Promise.reject(new ShoalError(ErrorCode.INTERNAL, 'unused')),
  tokenize: () => Promise.reject(new ShoalError(ErrorCode.INTERNAL, 'unused')),
  close: async () => undefined,
};

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'shoal-search-groups-'));
});
afterAll(() => rm(dir, { recursive: true, force: true }));

describe('searchDocuments', () => {
  it('widens the pool while fewer than k documents came out of a full one, and stops when the store has no more', async () => {
    const sink = new CountingStore({ dir });
    try {
      await sink.prepare({ dimension: 2, distance: 'cosine', optionalColumns: [], metadata: { model: 'm' } });
      // 80 short chunks of one manual say "lighthouse" twice (the best BM25 scores); two notes say it once in longer text.
      const manual = Array.from({ length: 80 }, (_, i) => row(`m${String(i).padStart(2, '0')}`, 'manual', i, `lighthouse lighthouse ${i}`));
      const notes = [row('n0', 'note-a', 0, 'a lighthouse stands on the far rocky cape north of the bay'), row('n1', 'note-b', 0, 'the old lighthouse on the island was painted red and white last year')];
      await sink.commit([...manual, ...notes], [state('manual', 80), state('note-a', 1), state('note-b', 1)]);

      const documents = await searchDocuments(refusing, sink, { query: 'lighthouse', k: 3, mode: 'text', where: 'test' });
      expect(documents.map((document) => document.source)).toEqual(['manual', expect.stringMatching(/^note-/), expect.stringMatching(/^note-/)]);
      expect(documents.map((document) => document.rank)).toEqual([1, 2, 3]);
      expect(documents[0]?.hits).toHaveLength(3);
      expect(documents[0]?.score).toBe(documents[0]?.hits[0]?.score);
      // The first pool (50 chunks, all the manual's) gave one document; the second (200) found all 82 matches.
      expect(sink.asked).toEqual([groupPool(3), groupPool(3) * 4]);
      expect(sink.asked).toEqual([50, 200]);

      // k = 4 documents where only 3 match: the pool is widened once (the second came back short of full) and 3 are answered.
      sink.asked.length = 0;
      const all = await searchDocuments(refusing, sink, { query: 'lighthouse', k: 4, mode: 'text', where: 'test' });
      expect(all).toHaveLength(3);
      expect(sink.asked).toEqual([50, 200]);
    } finally {
      await sink.close();
    }
  });
});
