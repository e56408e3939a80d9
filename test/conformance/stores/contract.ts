import { describe, expect, it } from 'vitest';
import { ErrorCode } from '../../../adapters/protocol/errors.js';
import { validateFilter } from '../../../adapters/stores/shared/filter.js';
import type { ChunkRow, DocumentState, Store, TableSpec } from '../../../adapters/stores/store.js';
import { metadataContract, type MetadataFilterForm } from './contract-metadata.js';
import { vectorTypeContract, type StoredVectorReader } from './contract-types.js';

/**
 * What every Store must do, as one suite that test/conformance/stores.test.ts runs for every
 * backend of the registry (each through its harness, stores/harnesses.ts): create on first use,
 * refuse a mismatched table, idempotent upserts, replacement of a changed source, states (by
 * source and by prefix), removal of sources, count and filtered search.
 */

const SPEC: TableSpec = { dimension: 3, distance: 'cosine', optionalColumns: ['labels'], metadata: { model: 'm1' } };

function row(source: string, documentId: string, chunk: number, vector: number[], settings = 's'): ChunkRow {
  return {
    id: `${source}:${documentId}:${settings}:${chunk}`, document_id: documentId, source, page: chunk + 1, chunk, text: `${source} chunk ${chunk}`,
    start: chunk * 10, end: chunk * 10 + 9, heading: chunk === 0 ? null : 'H', settings, vector, entities: null, labels: '[]', ingested_at: '2026-01-01T00:00:00.000Z',
  };
}

function state(source: string, documentId: string, chunks: number, settings = 's'): DocumentState {
  return { source, document_id: documentId, settings, chunks, pages: chunks, ingested_at: '2026-01-01T00:00:00.000Z' };
}

/** Filter forms a backend may refuse with UNSUPPORTED_OPERATION (its docs/storage.md section says so). */
export interface ContractOptions {
  unsupportedFilters?: readonly ('like' | 'null')[];
  /** Reads stored vectors through the backend's own client, for the output-type cases (contract-types.ts). */
  storedVectors?: StoredVectorReader;
  /** Metadata filter forms the backend refuses with UNSUPPORTED_OPERATION (contract-metadata.ts). */
  refusedMetadataFilters?: readonly MetadataFilterForm[];
}

/** `open(name)` opens the table `name` of one backend; a second call with the same name sees the same data. */
export function storeContract(backend: string, open: (table: string) => Store, options: ContractOptions = {}): void {
  describe(`Store contract: ${backend}`, () => {
    vectorTypeContract(open, options.storedVectors);
    metadataContract(open, options.refusedMetadataFilters);
    it('creates the table with its spec, upserts, replaces a changed source and searches with a filter', async () => {
      const sink = open('docs');
      expect(await sink.describe()).toBeNull();
      expect(await sink.states(['a'])).toEqual(new Map());
      await sink.prepare(SPEC);
      await sink.commit([row('a', 'd1', 0, [1, 0, 0]), row('a', 'd1', 1, [0, 1, 0]), row('b', 'd2', 0, [0, 0, 1])], [state('a', 'd1', 2), state('b', 'd2', 1)]);
      // The same commit again: upserts by id, nothing doubled.
      await sink.commit([row('a', 'd1', 0, [1, 0, 0]), row('a', 'd1', 1, [0, 1, 0])], [state('a', 'd1', 2)]);
      expect(await sink.count()).toBe(3);
      // Source a changes content: its old rows go, b's stay.
      await sink.commit([row('a', 'd3', 0, [0.9, 0.1, 0])], [state('a', 'd3', 1)]);
      expect(await sink.count()).toBe(2);
      expect(await sink.count("document_id = 'd1'")).toBe(0);
      expect((await sink.states(['a', 'b', 'c'])).get('a')).toMatchObject({ document_id: 'd3', chunks: 1 });
      // A settings change alone also replaces.
      await sink.commit([row('b', 'd2', 0, [0, 0, 1], 't')], [state('b', 'd2', 1, 't')]);
      expect(await sink.count("settings = 's'")).toBe(1);
      expect(await sink.count()).toBe(2);

      const hits = await sink.search([1, 0, 0], { k: 5 });
      expect(hits.map((hit) => hit.row.document_id)).toEqual(['d3', 'd2']);
      expect(hits[0]?.score).toBeCloseTo(0.9 / Math.hypot(0.9, 0.1), 5);
      expect(hits[1]?.score).toBeCloseTo(0, 5);
      expect(hits[0]?.row).toMatchObject({ source: 'a', page: 1, chunk: 0, text: 'a chunk 0', start: 0, end: 9, heading: null, labels: '[]' });
      const filtered = await sink.search([1, 0, 0], { k: 5, filter: validateFilter("source = 'b' AND end < 100") });
      expect(filtered.map((hit) => hit.row.source)).toEqual(['b']);
      await sink.optimize();
      await sink.close();

      // Opened again, the stored spec and metadata come back; a mismatched spec is refused.
      const again = open('docs');
      expect(await again.describe()).toEqual({ dimension: 3, distance: 'cosine', vectorType: 'float32', optionalColumns: ['labels'], metadata: { model: 'm1' } });
      await again.prepare(SPEC);
      await expect(again.prepare({ ...SPEC, dimension: 4 })).rejects.toMatchObject({ code: ErrorCode.CONFIG_INVALID, message: expect.stringContaining('dimension 3') });
      await expect(again.prepare({ ...SPEC, distance: 'l2' })).rejects.toMatchObject({ code: ErrorCode.CONFIG_INVALID });
      await expect(again.prepare({ ...SPEC, optionalColumns: ['labels', 'entities'] })).rejects.toMatchObject({ code: ErrorCode.CONFIG_INVALID });
      await again.close();
    });

    it('scores as LanceDB does for every distance (cosine similarity, -squared L2, dot product) and translates every filter form', async () => {
      const rows = [row('a', 'd1', 0, [1, 0, 0]), row('a', 'd1', 1, [0, 2, 0]), row('b', 'd2', 0, [0, 0, 3]), row('c', 'd3', 0, [1, 1, 0])];
      const states = [state('a', 'd1', 2), state('b', 'd2', 1), state('c', 'd3', 1)];
      const expected: Record<'l2' | 'dot', number[]> = { l2: [-0, -1, -2, -11], dot: [2, 2, 1, 0] };
      for (const distance of ['l2', 'dot'] as const) {
        const sink = open(`scores-${distance}`);
        await sink.prepare({ ...SPEC, distance });
        await sink.commit(rows, states);
        const hits = await sink.search([1, 1, 0], { k: 4 });
        const scores = hits.map((hit) => hit.score);
        expected[distance].forEach((value, at) => expect(scores[at]).toBeCloseTo(value, 4));
        if (distance === 'l2') expect(hits.map((hit) => hit.row.id)).toEqual(['c:d3:s:0', 'a:d1:s:0', 'a:d1:s:1', 'b:d2:s:0']);
        await sink.close();
      }
      const sink = open('scores-dot');
      const ids = async (filter: string): Promise<string[]> => (await sink.search([1, 1, 0], { k: 10, filter: validateFilter(filter) })).map((hit) => hit.row.id).sort();
      expect(await ids("source IN ('a', 'c')")).toEqual(['a:d1:s:0', 'a:d1:s:1', 'c:d3:s:0']);
      expect(await ids("NOT source = 'a'")).toEqual(['b:d2:s:0', 'c:d3:s:0']);
      expect(await ids('page BETWEEN 2 AND 5')).toEqual(['a:d1:s:1']);
      expect(await ids("page >= 2 OR (source = 'c' AND chunk = 0)")).toEqual(['a:d1:s:1', 'c:d3:s:0']);
      expect(await ids("source NOT IN ('a') AND end <= 9")).toEqual(['b:d2:s:0', 'c:d3:s:0']);
      expect(await sink.count('start > 5')).toBe(1);
      const maybe = async (kind: 'like' | 'null', filter: string, want: string[]): Promise<void> => {
        if (options.unsupportedFilters?.includes(kind) === true) {
          await expect(ids(filter)).rejects.toMatchObject({ code: ErrorCode.UNSUPPORTED_OPERATION });
        } else {
          expect(await ids(filter)).toEqual(want);
        }
      };
      await maybe('like', "text LIKE 'a chunk%'", ['a:d1:s:0', 'a:d1:s:1']);
      // A backslash escapes the next character, as in PostgreSQL and LanceDB (`\_` is a literal '_', `\0` a '0').
      await maybe('like', "text LIKE 'a chunk \\0'", ['a:d1:s:0']);
      await maybe('like', "text LIKE 'a\\_chunk%'", []);
      await maybe('null', 'heading IS NULL', ['a:d1:s:0', 'b:d2:s:0', 'c:d3:s:0']);
      await maybe('null', 'heading IS NOT NULL', ['a:d1:s:1']);
      // SQL's three-valued logic, as LanceDB and PostgreSQL apply it: a comparison with a null
      // heading is unknown, and so is its negation, so a row without a heading matches neither
      // `heading = 'H'` nor `heading <> 'H'` (a store that would match it refuses instead).
      await maybe('null', "heading <> 'H'", []);
      await maybe('null', "heading <> 'X'", ['a:d1:s:1']);
      await maybe('null', "NOT heading = 'H'", []);
      await maybe('null', "heading NOT IN ('H', 'X')", []);
      await maybe('null', "NOT (heading = 'H' OR page > 5)", []);
      await maybe('null', "heading <> 'H' OR source = 'b'", ['b:d2:s:0']);
      await sink.close();
    });

    it('lists the states under a source prefix and removes sources with their rows (shoal ingest --prune)', async () => {
      const sink = open('prune');
      await sink.prepare(SPEC);
      // More sources than a default query page of 10, under two folders and one look-alike prefix.
      const sources = [...Array.from({ length: 12 }, (_, i) => `/docs/f${String(i).padStart(2, '0')}.txt`), '/docs/sub/g.md', '/docs-old/h.txt', 'record-1'];
      await sink.commit(
        sources.flatMap((source, i) => [row(source, `d${i}`, 0, [1, i, 0]), row(source, `d${i}`, 1, [0, 1, i])]),
        sources.map((source, i) => state(source, `d${i}`, 2)),
      );
      const under = async (prefix: string): Promise<string[]> => (await sink.statesUnder(prefix)).map((s) => s.source).sort();
      expect(await under('/docs/')).toEqual(sources.slice(0, 13));
      expect(await under('/docs/sub/')).toEqual(['/docs/sub/g.md']);
      expect(await under('/nothing/')).toEqual([]);
      expect((await sink.statesUnder('/docs/sub/'))[0]).toEqual(state('/docs/sub/g.md', 'd12', 2));

      await sink.remove(['/docs/f03.txt', '/docs/sub/g.md', '/never/ingested.txt']);
      expect(await sink.count()).toBe(2 * (sources.length - 2));
      expect(await sink.count("source = '/docs/f03.txt'")).toBe(0);
      expect(await sink.count("source = '/docs/f04.txt'")).toBe(2);
      expect([...(await sink.states(['/docs/f03.txt', '/docs/sub/g.md', '/docs/f04.txt'])).keys()]).toEqual(['/docs/f04.txt']);
      expect(await under('/docs/')).toEqual(sources.slice(0, 12).filter((source) => source !== '/docs/f03.txt'));
      // Removing again, or nothing, changes nothing.
      await sink.remove(['/docs/f03.txt']);
      await sink.remove([]);
      expect(await sink.count()).toBe(2 * (sources.length - 2));
      const hits = await sink.search([1, 0, 0], { k: 100 });
      expect(hits.some((hit) => hit.row.source === '/docs/f03.txt' || hit.row.source === '/docs/sub/g.md')).toBe(false);
      await sink.close();

      // A state recorded before any table exists (a document without text) is listed and removed too.
      const empty = open('prune-empty');
      expect(await empty.statesUnder('/')).toEqual([]);
      await empty.remove(['/blank.txt']);
      await empty.commit([], [state('/blank.txt', 'd0', 0)]);
      expect((await empty.statesUnder('/')).map((s) => s.source)).toEqual(['/blank.txt']);
      await empty.remove(['/blank.txt']);
      expect(await empty.statesUnder('/')).toEqual([]);
      await empty.close();
    });

    it('records states of documents without rows before the table exists', async () => {
      const sink = open('empty');
      await sink.commit([], [state('blank.txt', 'd0', 0)]);
      expect((await sink.states(['blank.txt'])).get('blank.txt')).toMatchObject({ chunks: 0 });
      expect(await sink.describe()).toBeNull();
      expect(await sink.count()).toBe(0);
      await sink.close();
    });
  });
}
