import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import * as lancedb from '@lancedb/lancedb';
import { LanceDbSink } from '../../../adapters/sinks/lancedb.js';
import type { ChunkRow, DocumentState } from '../../../adapters/sinks/sink.js';
import { sinkContract } from './sink-contract.js';

/** The LanceDB sink on a real embedded database in a temp folder. */

const dir = await mkdtemp(join(tmpdir(), 'shoal-lancedb-'));
afterAll(() => rm(dir, { recursive: true, force: true }));

sinkContract('lancedb', (table) => new LanceDbSink({ dir, table }));

describe('LanceDbSink', () => {
  it('reading a missing index neither fails nor creates its folder', async () => {
    const missing = join(dir, 'not-there');
    const sink = new LanceDbSink({ dir: missing });
    expect(await sink.describe()).toBeNull();
    expect(await sink.states(['a'])).toEqual(new Map());
    expect(await sink.count()).toBe(0);
    expect(existsSync(missing)).toBe(false);
    await sink.close();
  });

  it('builds an IVF-PQ vector index once the table reaches the threshold, and search still finds exact rows', async () => {
    const sink = new LanceDbSink({ dir, table: 'indexed', vectorIndexMinRows: 1000 });
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
    expect(() => new LanceDbSink({ dir, table: '../x' })).toThrow(/table name/);
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
