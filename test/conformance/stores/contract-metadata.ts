import { expect, it } from 'vitest';
import { ErrorCode } from '../../../adapters/protocol/errors.js';
import type { DocumentMetadata } from '../../../adapters/protocol/metadata.js';
import { validateFilter } from '../../../adapters/stores/shared/filter.js';
import { matchesFilter, parseFilter } from '../../../adapters/stores/shared/filter-tree.js';
import type { ChunkRow, DocumentState, Store } from '../../../adapters/stores/store.js';

/**
 * The metadata part of the Store contract (contract.ts runs it for every backend): document
 * metadata is stored with each chunk, comes back with each hit as written, and every filter
 * operator on `metadata.<field>` selects the same rows in every store, as adapters/stores/
 * shared/filter-metadata.ts defines them (an absent field is unknown, a value of another type is false,
 * a list matches `=` by holding the value). Forms a store cannot express are refused with
 * UNSUPPORTED_OPERATION, never approximated.
 */

/** Metadata filter forms a backend may refuse (docs/storage.md says which). */
export type MetadataFilterForm = 'negated' | 'null' | 'string-range';

const METADATA: Readonly<Record<string, DocumentMetadata | null>> = {
  a: { title: 'Alpha', year: 2019, tag: ['x', 'y'], ok: true, date: '2019-05-01', score: 0.5 },
  b: { title: "Beta's", year: 2021, tag: ['y'], ok: false, date: '2021-01-15', note: null, score: 2 },
  c: { title: 'Gamma', year: '2022', tag: 'x', date: '2022-12-31', url: 'https://example.org/c?x=1', quote: 'say "hi" \\ café ☃' },
  d: null,
};

function row(source: string, vector: number[]): ChunkRow {
  return {
    id: `${source}:doc:s:0`, document_id: `doc-${source}`, source, page: 1, chunk: 0, text: `${source} text`, start: 0, end: 5, heading: null, settings: 's',
    vector, entities: null, labels: null, ingested_at: '2026-01-01T00:00:00.000Z', metadata: METADATA[source] ?? null,
  };
}

function state(source: string): DocumentState {
  return { source, document_id: `doc-${source}`, settings: 's', chunks: 1, pages: 1, ingested_at: '2026-01-01T00:00:00.000Z' };
}

export function metadataContract(open: (table: string) => Store, refused: readonly MetadataFilterForm[] = []): void {
  it('stores document metadata with each chunk, returns it with hits and filters on every metadata operator', async () => {
    const sink = open('metadata');
    await sink.prepare({ dimension: 3, distance: 'cosine', optionalColumns: [], metadata: { model: 'm' } });
    const rows = [row('a', [1, 0, 0]), row('b', [0, 1, 0]), row('c', [0, 0, 1]), row('d', [1, 1, 1])];
    await sink.commit(rows, rows.map((r) => state(r.source)));

    // Round trip: every hit carries its document's metadata as written (null without).
    const hits = await sink.search([1, 0, 0], { k: 10 });
    expect(hits).toHaveLength(4);
    for (const hit of hits) expect(hit.row.metadata ?? null, hit.row.source).toEqual(METADATA[hit.row.source]);

    const sources = async (filter: string): Promise<string[]> => (await sink.search([1, 1, 1], { k: 10, filter: validateFilter(filter) })).map((hit) => hit.row.source).sort();
    const cases: [string, string[], MetadataFilterForm?][] = [
      ['metadata.year >= 2020', ['b']],
      ['metadata.year = 2019', ['a']],
      // A number never equals a string: c's year is the text '2022'.
      ["metadata.year = '2022'", ['c']],
      ['metadata.year > 2000.5 AND metadata.score < 1', ['a']],
      // A fraction and a mixed list (Qdrant's `match` takes neither: it gets ranges).
      ['metadata.score = 0.5', ['a']],
      ["metadata.score IN (2, 'x') OR metadata.year IN (2019.0, 'none')", ['a', 'b']],
      ['metadata.year BETWEEN 2018 AND 2020', ['a']],
      // A list matches `=` by holding the value; a plain string by being it.
      ["metadata.tag = 'x'", ['a', 'c']],
      ["metadata.tag IN ('y', 'z')", ['a', 'b']],
      ['metadata.ok = true', ['a']],
      ['metadata.ok = false', ['b']],
      ["metadata.title = 'Beta''s' OR source = 'c'", ['b', 'c']],
      ["metadata.url = 'https://example.org/c?x=1'", ['c']],
      // Quotes, a backslash and non-ASCII text compare exactly (LanceDB compares the JSON text).
      ["metadata.quote = 'say \"hi\" \\ café ☃'", ['c']],
      ['metadata.nothing = 1', []],
      ["metadata.date >= '2021-01-01' AND metadata.date < '2022-06-01'", ['b'], 'string-range'],
      // Negations: unknown (no match) where the field is absent, as SQL does with null columns.
      ["metadata.tag <> 'x'", ['b'], 'negated'],
      ['NOT metadata.year >= 2020', ['a', 'c'], 'negated'],
      ["metadata.tag NOT IN ('y')", ['c'], 'negated'],
      ['metadata.note IS NULL', ['a', 'b', 'c', 'd'], 'null'],
      ['metadata.ok IS NULL', ['c', 'd'], 'null'],
      ['metadata.title IS NOT NULL', ['a', 'b', 'c'], 'null'],
    ];
    for (const [filter, want, form] of cases) {
      // The in-process evaluator (the JSON Lines and S3 outputs) is the reference every store matches.
      expect(rows.filter((r) => matchesFilter(parseFilter(validateFilter(filter)), Object.fromEntries(Object.entries(r)))).map((r) => r.source).sort(), `reference: ${filter}`).toEqual(want);
      if (form !== undefined && refused.includes(form)) {
        await expect(sources(filter), filter).rejects.toMatchObject({ code: ErrorCode.UNSUPPORTED_OPERATION });
      } else {
        expect(await sources(filter), filter).toEqual(want);
      }
    }
    expect(await sink.count(validateFilter("metadata.tag = 'y'"))).toBe(2);

    // Re-committing a document with other metadata replaces it (the rows are upserted whole).
    const changed = { ...row('a', [1, 0, 0]), metadata: { title: 'Alpha 2', year: 2030 } };
    await sink.commit([changed], [state('a')]);
    expect(await sources('metadata.year >= 2025')).toEqual(['a']);
    expect((await sink.search([1, 0, 0], { k: 1 }))[0]?.row.metadata).toEqual({ title: 'Alpha 2', year: 2030 });
    await sink.close();
  });
}
