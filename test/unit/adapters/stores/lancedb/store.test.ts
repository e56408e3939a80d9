import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import * as lancedb from '@lancedb/lancedb';
import { ErrorCode } from '../../../../../adapters/protocol/errors.js';
import { validateFilter } from '../../../../../adapters/stores/shared/filter.js';
import { LanceDbStore } from '../../../../../adapters/stores/lancedb/store.js';
import { winnerRows } from '../../../../../adapters/stores/lancedb/winners.js';
import type { ChunkRow, DocumentState } from '../../../../../adapters/stores/store.js';

/** The LanceDB store on a real embedded database in a temp folder, beyond the shared contract (test/conformance/stores.test.ts). */

const dir = await mkdtemp(join(tmpdir(), 'shoal-lancedb-'));
afterAll(() => rm(dir, { recursive: true, force: true }));

/** A table opened with LanceDB's own client (not the sink). */
async function table(name: string): Promise<lancedb.Table> {
  return (await lancedb.connect(dir)).openTable(name);
}

describe('LanceDbStore', () => {
  it('reading a missing index neither fails nor creates its folder', async () => {
    const missing = join(dir, 'not-there');
    const sink = new LanceDbStore({ dir: missing });
    expect(await sink.describe()).toBeNull();
    expect(await sink.states(['a'])).toEqual(new Map());
    expect(await sink.count()).toBe(0);
    expect(existsSync(missing)).toBe(false);
    await sink.close();
  });

  it('builds an IVF-PQ vector index once the table reaches the threshold, and search still finds exact rows', async () => {
    const sink = new LanceDbStore({ dir, table: 'indexed', vectorIndexMinRows: 1000 });
    await sink.prepare({ dimension: 32, distance: 'cosine', optionalColumns: [], metadata: {} });
    const vector = (i: number): number[] => Array.from({ length: 32 }, (_, d) => Math.sin(i * 0.37 + d * 1.3) + (d === i % 32 ? 3 : 0));
    const rows = (from: number, to: number): ChunkRow[] =>
      Array.from({ length: to - from }, (_, k) => {
        const i = from + k;
        return { id: `r${i}`, document_id: `d${i}`, source: `s${i}`, page: 1, chunk: 0, text: `row ${i}`, start: 0, end: 5, heading: null, settings: 's', vector: vector(i), entities: null, labels: null, ingested_at: 'now' };
      });
    const states = (from: number, to: number): DocumentState[] =>
      Array.from({ length: to - from }, (_, k) => ({ source: `s${from + k}`, document_id: `d${from + k}`, settings: 's', chunks: 1, pages: 1, ingested_at: 'now' }));
    await sink.commit(rows(0, 600), states(0, 600));
    await sink.optimize();
    expect(await vectorIndices(join(dir), 'indexed')).toBe(0);
    await sink.commit(rows(600, 1200), states(600, 1200));
    await sink.optimize();
    expect(await vectorIndices(join(dir), 'indexed')).toBe(1);
    const [hit] = await sink.search(vector(777), { k: 1 });
    expect(hit?.row.id).toBe('r777');
    await sink.close();
  });

  it('refuses a table name that is not a plain identifier', () => {
    expect(() => new LanceDbStore({ dir, table: '../x' })).toThrow(/table name/);
  });
});

async function vectorIndices(index: string, table: string): Promise<number> {
  const db = await lancedb.connect(index);
  const t = await db.openTable(table);
  const indices = await t.listIndices();
  t.close();
  db.close();
  return indices.filter((entry) => entry.columns.includes('vector')).length;
}

describe('LanceDbStore output types', () => {
  it('indexes a binary table with IVF-flat under Hamming distance past the threshold, and still finds exact rows', async () => {
    const sink = new LanceDbStore({ dir, table: 'binary-ivf', vectorIndexMinRows: 300 });
    await sink.prepare({ dimension: 4, distance: 'cosine', vectorType: 'ubinary', optionalColumns: [], metadata: {} });
    const bytes = (i: number): number[] => [i % 256, (i * 7) % 256, (i * 13) % 256, (i * 31) % 256];
    const rows: ChunkRow[] = Array.from({ length: 600 }, (_, i) => ({
      id: `r${i}`, document_id: `d${i}`, source: `s${i}`, page: 1, chunk: 0, text: `row ${i}`, start: 0, end: 5, heading: null, settings: 's',
      vector: bytes(i), entities: null, labels: null, ingested_at: 'now',
    }));
    const states: DocumentState[] = rows.map((row) => ({ source: row.source, document_id: row.document_id, settings: 's', chunks: 1, pages: 1, ingested_at: 'now' }));
    await sink.commit(rows, states);
    await sink.optimize();
    const indices = await (await (await lancedb.connect(dir)).openTable('binary-ivf')).listIndices();
    expect(indices.find((index) => index.columns.includes('vector'))?.indexType).toBe('IvfFlat');
    // Row 5's bytes also belong to rows 261 and 517 (the pattern repeats every 256): all at distance 0, ties by id.
    const hits = await sink.search(bytes(5), { k: 3 });
    expect(hits.map((hit) => [hit.row.id, hit.score])).toEqual([['r261', 1], ['r5', 1], ['r517', 1]]);
    await sink.close();
  });
});

describe('LanceDbStore metadata on a table made before metadata', () => {
  it('opens, searches and appends as before, and refuses a metadata filter with the advice to re-index', async () => {
    const name = 'before_metadata';
    const row = (source: string, vector: number[], metadata: ChunkRow['metadata']): ChunkRow => ({
      id: `${source}:0`, document_id: `d-${source}`, source, page: 1, chunk: 0, text: source, start: 0, end: 1, heading: null, settings: 's',
      vector, entities: null, labels: null, ingested_at: '2026-01-01T00:00:00.000Z', metadata,
    });
    const state = (source: string): DocumentState => ({ source, document_id: `d-${source}`, settings: 's', chunks: 1, pages: 1, ingested_at: '2026-01-01T00:00:00.000Z' });
    const first = new LanceDbStore({ dir, table: name });
    await first.prepare({ dimension: 2, distance: 'cosine', optionalColumns: [], metadata: {} });
    await first.commit([row('a', [1, 0], null)], [state('a')]);
    await first.close();
    // What an index written by an earlier Shoal looks like: the same table without the column.
    await (await table(name)).dropColumns(['metadata']);

    const sink = new LanceDbStore({ dir, table: name });
    await sink.prepare({ dimension: 2, distance: 'cosine', optionalColumns: [], metadata: {} });
    await sink.commit([row('b', [0, 1], { year: 2020 })], [state('b')]);
    expect((await table(name).then((t) => t.schema())).fields.map((field) => field.name)).not.toContain('metadata');
    const hits = await sink.search([1, 0], { k: 5, filter: validateFilter("source IN ('a', 'b')") });
    expect(hits.map((hit) => [hit.row.source, hit.row.metadata])).toEqual([['a', null], ['b', null]]);
    await expect(sink.search([1, 0], { k: 5, filter: validateFilter('metadata.year = 2020') })).rejects.toMatchObject({
      code: ErrorCode.INVALID_INPUT,
      message: expect.stringContaining('re-index'),
    });
    await expect(sink.count(validateFilter('metadata.year = 2020'))).rejects.toMatchObject({ code: ErrorCode.INVALID_INPUT });
    await sink.close();
  });
});

describe('winnerRows (a search reads its k winners by row id after ranking)', () => {
  it('reads the winners by address, and by id when an address no longer holds the row it named', async () => {
    const name = 'winners';
    const sink = new LanceDbStore({ dir, table: name });
    await sink.prepare({ dimension: 2, distance: 'cosine', optionalColumns: [], metadata: {} });
    const rows: ChunkRow[] = Array.from({ length: 6 }, (_, i) => ({
      id: `w${i}`, document_id: `d${i}`, source: `s${i}`, page: 1, chunk: 0, text: `text ${i}`, start: 0, end: 6, heading: null, settings: 's',
      vector: [Math.cos(i / 3), Math.sin(i / 3)], entities: null, labels: null, ingested_at: '2026-01-01T00:00:00.000Z',
    }));
    await sink.commit(rows, rows.map((row) => ({ source: row.source, document_id: row.document_id, settings: 's', chunks: 1, pages: 1, ingested_at: row.ingested_at })));
    // Through the store: two reads, the ranking and the columns of the hits as before.
    const hits = await sink.search([1, 0], { k: 3 });
    expect(hits.map((hit) => [hit.row.id, hit.row.text])).toEqual([['w0', 'text 0'], ['w1', 'text 1'], ['w2', 'text 2']]);

    const chunks = await table(name);
    const addressed = (await chunks.query().select(['id']).withRowId().toArray()) as { id: string; _rowid: bigint }[];
    const rowIdOf = new Map(addressed.map((row) => [row.id, row._rowid]));
    const winner = (id: string): { id: string; rowId: bigint } => ({ id, rowId: rowIdOf.get(id) ?? -1n });
    const columns = ['id', 'document_id', 'source', 'page', 'chunk', 'text', 'start', 'end', 'heading', 'settings', 'ingested_at'];
    const direct = await winnerRows(chunks, columns, [winner('w4'), winner('w1')]);
    expect([...direct.keys()].sort()).toEqual(['w1', 'w4']);
    expect(direct.get('w4')?.text).toBe('text 4');
    // What a compaction between the two reads looks like: the address now holds another row (w5's), or none.
    const swapped = await winnerRows(chunks, columns, [{ id: 'w4', rowId: rowIdOf.get('w5') ?? -1n }, winner('w1')]);
    expect([...swapped.entries()].map(([id, row]) => [id, row.text]).sort()).toEqual([['w1', 'text 1'], ['w4', 'text 4']]);
    const gone = await winnerRows(chunks, columns, [{ id: 'w2', rowId: 1n << 40n }]);
    expect(gone.get('w2')?.text).toBe('text 2');
    // A winner deleted in between is left out, not invented.
    await chunks.delete("id = 'w3'");
    expect([...(await winnerRows(chunks, columns, [winner('w3'), winner('w0')])).keys()]).toEqual(['w0']);
    await sink.close();
  });
});
