import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as lancedb from '@lancedb/lancedb';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ErrorCode } from '../../../../../adapters/protocol/errors.js';
import { validateFilter } from '../../../../../adapters/stores/shared/filter.js';
import { LanceDbStore } from '../../../../../adapters/stores/lancedb/store.js';
import { TEXT_INDEX_NAME } from '../../../../../adapters/stores/lancedb/text.js';
import { openIndexUri } from '../../../../../adapters/stores/open.js';
import { PgVectorStore } from '../../../../../adapters/stores/pgvector/store.js';
import type { ChunkRow, DocumentState, Store, TableSpec } from '../../../../../adapters/stores/store.js';
import { searchTextOf } from '../../../../../adapters/stores/shared/text-search.js';
import { startPgliteServer, type PgliteServerHandle } from '../../../../helpers/pglite-server.js';

/**
 * Full-text search in the stores that rank by text: LanceDB (its inverted index, BM25) and
 * pgvector (ts_rank over a stored tsvector column with a GIN index, PGlite over its socket server). Asserted on
 * real rankings: a chunk with the query's rare words ranks first, stemming matches other forms,
 * rows sharing no word are left out, filters apply; the index is built by the first text search
 * (a table written before text search existed) and follows later commits (appended, replaced and
 * removed rows). Chroma and Qdrant refuse with UNSUPPORTED_OPERATION.
 */

const SPEC: TableSpec = { dimension: 2, distance: 'cosine', optionalColumns: [], metadata: { model: 'm' } };
const AT = '2026-01-01T00:00:00.000Z';

function row(id: string, source: string, text: string, page = 1): ChunkRow {
  return { id, document_id: `d-${source}`, source, page, chunk: Number(id.slice(1)), text, start: 0, end: text.length, heading: `heading of ${id}`, settings: 's', vector: [1, 0], entities: null, labels: null, ingested_at: AT };
}
const state = (source: string, chunks: number, documentId = `d-${source}`): DocumentState => ({ source, document_id: documentId, settings: 's', chunks, pages: 1, ingested_at: AT });

const ROWS = [
  row('r0', 'bakery', 'The bakery on Elm Street sells rye bread and a famous cardamom bun.'),
  row('r1', 'bakery', 'Opening hours are seven to three; the bakery closes on Mondays.', 2),
  row('r2', 'harbor', 'The harbor master counts forty fishing boats every morning.'),
  row('r3', 'glacier', 'The glacier retreated eleven meters over the last summer.'),
  row('r4', 'orchard', 'Apple trees in the northern orchard bloom two weeks later.'),
];
const STATES = [state('bakery', 2), state('harbor', 1), state('glacier', 1), state('orchard', 1)];

let dir: string;
let pglite: PgliteServerHandle;
const connection = (): { host: string; port: number; user: string; database: string; ssl: false } => ({ host: '127.0.0.1', port: pglite.port, user: 'postgres', database: 'postgres', ssl: false });
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'shoal-text-sinks-'));
  pglite = await startPgliteServer();
}, 60_000);
afterAll(async () => {
  await pglite?.stop();
  await rm(dir, { recursive: true, force: true });
});

const ids = async (sink: Store, query: string, k = 10, filter?: string): Promise<string[]> =>
  (await searchTextOf(sink, query, { k, ...(filter === undefined ? {} : { filter: validateFilter(filter) }) })).map((hit) => hit.row.id);

/** The same expectations for every store that ranks by text. */
async function expectRankings(sink: Store): Promise<void> {
  // The rare words of one chunk put it first; a chunk sharing only "bakery" comes after; no other row shares a word.
  expect(await ids(sink, 'cardamom bun bakery')).toEqual(['r0', 'r1']);
  // Stemming and case: "Boat" and "mornings" match "boats" and "morning".
  expect(await ids(sink, 'Boat mornings')).toEqual(['r2']);
  // Punctuation, quotes and operators are words or nothing, never query syntax.
  expect(await ids(sink, 'glacier: "retreat" AND (NOT) -summer \\ \'')).toEqual(['r3']);
  // Only stop words, or words no chunk has: nothing.
  expect(await ids(sink, 'the of and')).toEqual([]);
  expect(await ids(sink, 'zeppelin')).toEqual([]);
  // k and filters apply.
  expect(await ids(sink, 'bakery', 1)).toHaveLength(1);
  expect(await ids(sink, 'bakery', 10, 'page = 2')).toEqual(['r1']);
  const [hit] = await searchTextOf(sink, 'cardamom', { k: 1 });
  expect(hit?.score).toBeGreaterThan(0);
  expect(hit?.row).toMatchObject({ id: 'r0', source: 'bakery', heading: 'heading of r0', chunk: 0, start: 0, end: ROWS[0]?.text.length, page: 1 });
  await expect(searchTextOf(sink, '   ', { k: 3 })).rejects.toMatchObject({ code: ErrorCode.INVALID_INPUT });
}

/** Later commits are searched at once: a new row found, a replaced one's old words gone, a removed source gone. */
async function expectFollowsCommits(sink: Store, afterCommit: () => Promise<void>): Promise<void> {
  await sink.commit([row('r5', 'comet', 'A faint comet crossed the constellation of Orion in March.')], [state('comet', 1)]);
  await afterCommit();
  expect(await ids(sink, 'comet Orion')).toEqual(['r5']);
  // The harbor document changed: its new content replaces the old row.
  await sink.commit([{ ...row('r6', 'harbor', 'The harbor was dredged in the spring.'), document_id: 'd-harbor-2' }], [state('harbor', 1, 'd-harbor-2')]);
  await afterCommit();
  expect(await ids(sink, 'fishing boats')).toEqual([]);
  expect(await ids(sink, 'dredged harbor')).toEqual(['r6']);
  await sink.remove(['glacier']);
  expect(await ids(sink, 'glacier')).toEqual([]);
}

describe('LanceDB full-text search', () => {
  it('builds its index on the first text search, ranks by BM25, applies filters', async () => {
    const sink = new LanceDbStore({ dir: join(dir, 'lance'), table: 'notes' });
    const db = await lancedb.connect(join(dir, 'lance'), { readConsistencyInterval: 0 });
    try {
      await sink.prepare(SPEC);
      await sink.commit(ROWS, STATES);
      // Ingest builds no text index: a table like one written before text search existed.
      const table = await db.openTable('notes');
      expect((await table.listIndices()).map((index) => index.name)).toEqual([]);
      await expectRankings(sink);
      const indices = await table.listIndices();
      expect(indices.map((index) => [index.name, index.indexType, index.columns])).toEqual([[TEXT_INDEX_NAME, 'FTS', ['text']]]);
      table.close();
    } finally {
      db.close();
      await sink.close();
    }
  });

  it('follows later commits: rows appended after the index are searched (the search folds them in), and optimize() indexes them after a run', async () => {
    const sink = new LanceDbStore({ dir: join(dir, 'lance-follow') });
    const db = await lancedb.connect(join(dir, 'lance-follow'), { readConsistencyInterval: 0 });
    try {
      await sink.prepare(SPEC);
      await sink.commit(ROWS, STATES);
      expect(await ids(sink, 'cardamom')).toEqual(['r0']);
      const table = await db.openTable('chunks');
      await expectFollowsCommits(sink, async () => undefined);
      // optimize() (ingest's last step) leaves no row unindexed.
      await sink.commit([row('r7', 'tide', 'Spring tides flood the lower quay.')], [state('tide', 1)]);
      expect((await table.indexStats(TEXT_INDEX_NAME))?.numUnindexedRows).toBe(1);
      await sink.optimize();
      expect((await table.indexStats(TEXT_INDEX_NAME))?.numUnindexedRows).toBe(0);
      expect(await ids(sink, 'tides quay')).toEqual(['r7']);
      table.close();
    } finally {
      db.close();
      await sink.close();
    }
  });
});

describe('LanceDB full-text search, concurrent first searches', () => {
  it('two sinks searching a table without a text index at once (the gateway opens one per request) build it once, and both answer', async () => {
    const writer = new LanceDbStore({ dir: join(dir, 'lance-race') });
    const readers = [new LanceDbStore({ dir: join(dir, 'lance-race') }), new LanceDbStore({ dir: join(dir, 'lance-race') })];
    const db = await lancedb.connect(join(dir, 'lance-race'), { readConsistencyInterval: 0 });
    try {
      await writer.prepare(SPEC);
      await writer.commit(ROWS, STATES);
      const answers = await Promise.all(readers.map((reader) => ids(reader, 'cardamom bun')));
      expect(answers).toEqual([['r0'], ['r0']]);
      const table = await db.openTable('chunks');
      expect((await table.listIndices()).map((index) => index.name)).toEqual([TEXT_INDEX_NAME]);
      table.close();
    } finally {
      db.close();
      await Promise.all([writer, ...readers].map((sink) => sink.close()));
    }
  });
});

describe('pgvector full-text search', () => {
  it('ranks by ts_rank over a stored tsvector column and its GIN index, both added by the first text search, applies filters, follows commits', async () => {
    const sink = new PgVectorStore({ connection: connection(), table: 'notes' });
    const client = new pg.Client(connection());
    await client.connect();
    const indexes = async (): Promise<string[]> => (await client.query<{ indexname: string }>("SELECT indexname FROM pg_indexes WHERE tablename = 'notes' ORDER BY indexname")).rows.map((r) => r.indexname);
    try {
      await sink.prepare(SPEC);
      await sink.commit(ROWS, STATES);
      expect(await indexes()).toEqual(['notes__source', 'notes_pkey']);
      await expectRankings(sink);
      expect(await indexes()).toEqual(['notes__source', 'notes__text', 'notes_pkey']);
      // The tsvector is a stored generated column, and the GIN index on it serves the match.
      const column = await client.query<{ generation_expression: string }>("SELECT generation_expression FROM information_schema.columns WHERE table_name = 'notes' AND column_name = 'text_tsv'");
      expect(column.rows[0]?.generation_expression).toMatch(/^to_tsvector\('english'::regconfig, text\)$/);
      const plan = await client.query("SET enable_seqscan = off; EXPLAIN SELECT id FROM notes WHERE text_tsv @@ 'bakeri'::tsquery");
      expect(JSON.stringify(plan)).toContain('notes__text');
      await expectFollowsCommits(sink, async () => undefined);
    } finally {
      await client.end();
      await sink.close();
    }
  });
});

describe('stores that cannot rank by text', () => {
  it.each(['chroma://127.0.0.1:9/notes', 'qdrant://127.0.0.1:9/notes', `file://${tmpdir()}/shoal-never-written`])('%s refuses with UNSUPPORTED_OPERATION naming the stores that can', async (uri) => {
    const { store: sink } = openIndexUri(uri);
    try {
      const refusal = searchTextOf(sink, 'cardamom', { k: 3 });
      await expect(refusal).rejects.toMatchObject({ code: ErrorCode.UNSUPPORTED_OPERATION, details: { field: 'mode' } });
      await expect(refusal).rejects.toThrow(/^mode text needs a store that ranks chunks by their text, LanceDB \(the default, a folder\) or pgvector \(postgres:\/\/\)/);
    } finally {
      await sink.close();
    }
  });
});
