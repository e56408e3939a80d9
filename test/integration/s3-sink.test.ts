import { afterAll, describe, expect, it } from 'vitest';
import { S3Store } from '../../adapters/object-store/index.js';
import { validateFilter } from '../../adapters/stores/shared/filter.js';
import { LanceDbStore } from '../../adapters/stores/lancedb/store.js';
import { S3JsonStore, openS3Sink } from '../../adapters/stores/s3/store.js';
import type { ChunkRow, DocumentState } from '../../adapters/stores/store.js';
import { ErrorCode } from '../../adapters/protocol/errors.js';
import { startS3Server, type S3ServerHandle } from '../helpers/s3-server.js';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * The S3 store against a real s3rver, beyond the shared contract (test/conformance/stores.test.ts):
 * the object layout a reader of the bucket sees, filters beyond the contract's, and the same
 * ranking as LanceDB on the same rows.
 */

const BUCKET = 'shoal-index';
const server: S3ServerHandle = await startS3Server([BUCKET]);
const store = new S3Store(server.settings());
afterAll(async () => {
  store.close();
  await server.stop();
});

function vector(i: number, dim: number): number[] {
  return Array.from({ length: dim }, (_, d) => Math.sin(i * 0.71 + d * 1.37) + (d === i % dim ? 1.5 : 0));
}

function rowsOf(count: number, dim: number): { rows: ChunkRow[]; states: DocumentState[] } {
  const rows: ChunkRow[] = [];
  const states: DocumentState[] = [];
  for (let doc = 0; doc < count / 4; doc++) {
    for (let chunk = 0; chunk < 4; chunk++) {
      const i = doc * 4 + chunk;
      rows.push({ id: `r${i}`, document_id: `d${doc}`, source: `src-${doc}.pdf`, page: chunk + 1, chunk, text: `row ${i}`, start: 0, end: 10 + i, heading: i % 3 === 0 ? null : 'H', settings: 's', vector: vector(i, dim), entities: null, labels: null, ingested_at: 'now' });
    }
    states.push({ source: `src-${doc}.pdf`, document_id: `d${doc}`, settings: 's', chunks: 4, pages: 4, ingested_at: 'now' });
  }
  return { rows, states };
}

describe('S3JsonStore', () => {
  it('lays the index out as plain objects: spec, one JSON Lines object of rows and one state per source', async () => {
    const sink = await openS3Sink(`s3://${BUCKET}/layout?table=t1`, { store });
    await sink.prepare({ dimension: 4, distance: 'cosine', optionalColumns: [], metadata: { model: 'm' } });
    const { rows, states } = rowsOf(8, 4);
    await sink.commit(rows, states);
    const keys: string[] = [];
    for await (const object of store.list({ bucket: BUCKET, key: 'layout/t1/' })) keys.push(object.key);
    expect(keys.filter((key) => key.startsWith('layout/t1/rows/'))).toHaveLength(2);
    expect(keys.filter((key) => key.startsWith('layout/t1/documents/'))).toHaveLength(2);
    expect(keys).toContain('layout/t1/spec.json');
    const rowKey = keys.find((key) => key.startsWith('layout/t1/rows/')) ?? '';
    const lines = (await store.read({ bucket: BUCKET, key: rowKey }, 1e6)).toString('utf8').trim().split('\n');
    expect(lines).toHaveLength(4);
    expect(JSON.parse(lines[0] ?? '{}')).toMatchObject({ source: expect.stringMatching(/^src-\d\.pdf$/), chunk: 0, vector: expect.any(Array) });
    await sink.close();
  });

  it('evaluates the filter subset: IN, IS NULL, LIKE, BETWEEN, NOT, numeric comparisons', async () => {
    const sink = new S3JsonStore({ uri: `s3://${BUCKET}/filters`, store });
    await sink.prepare({ dimension: 4, distance: 'cosine', optionalColumns: [], metadata: {} });
    const { rows, states } = rowsOf(16, 4);
    await sink.commit(rows, states);
    const count = (filter: string): Promise<number> => sink.count(validateFilter(filter));
    expect(await count("source IN ('src-0.pdf', 'src-1.pdf')")).toBe(8);
    expect(await count('heading IS NULL')).toBe(rows.filter((row) => row.heading === null).length);
    expect(await count("text LIKE 'row 1%'")).toBe(rows.filter((row) => row.text.startsWith('row 1')).length);
    expect(await count('page BETWEEN 2 AND 3')).toBe(8);
    expect(await count("NOT (document_id = 'd0') AND end >= 20")).toBe(rows.filter((row) => row.document_id !== 'd0' && row.end >= 20).length);
    await expect(sink.search([1, 0, 0], { k: 3 })).rejects.toMatchObject({ code: ErrorCode.INVALID_INPUT });
    await sink.close();
  });

  it('ranks exactly as LanceDB does on the same rows (cosine and l2)', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'shoal-s3-vs-lance-'));
    try {
      for (const distance of ['cosine', 'l2'] as const) {
        const { rows, states } = rowsOf(200, 16);
        const s3 = new S3JsonStore({ uri: `s3://${BUCKET}/rank`, table: distance, store });
        const lance = new LanceDbStore({ dir, table: distance });
        for (const sink of [s3, lance]) {
          await sink.prepare({ dimension: 16, distance, optionalColumns: [], metadata: {} });
          await sink.commit(rows, states);
        }
        for (const q of [3, 77, 150]) {
          const query = vector(q, 16).map((x, d) => x + 0.1 * Math.cos(d));
          const [a, b] = await Promise.all([s3.search(query, { k: 10 }), lance.search(query, { k: 10 })]);
          expect(a.map((hit) => hit.row.id)).toEqual(b.map((hit) => hit.row.id));
          for (const [i, hit] of a.entries()) expect(hit.score).toBeCloseTo(b[i]?.score ?? NaN, 3);
        }
        await s3.close();
        await lance.close();
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
