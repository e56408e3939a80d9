import { readdir, readFile } from 'node:fs/promises';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { JsonlStore } from '../../../../../adapters/stores/file/store.js';

/** The file:// JSON Lines store in a temp folder, beyond the shared contract (test/conformance/stores.test.ts). */

const dir = await mkdtemp(join(tmpdir(), 'shoal-jsonl-'));
afterAll(() => rm(dir, { recursive: true, force: true }));

describe('JsonlStore', () => {
  it('keeps one file per source, state first, with no temp files left behind', async () => {
    const sink = new JsonlStore({ dir, table: 'files' });
    await sink.prepare({ dimension: 2, distance: 'dot', optionalColumns: [], metadata: {} });
    const row = { id: 'x', document_id: 'd', source: 'a.txt', page: 1, chunk: 0, text: 't', start: 0, end: 1, heading: null, settings: 's', vector: [1, 2], entities: null, labels: null, ingested_at: 'now' };
    await sink.commit([row, { ...row, id: 'y', chunk: 1 }], [{ source: 'a.txt', document_id: 'd', settings: 's', chunks: 2, pages: 1, ingested_at: 'now' }]);
    const names = (await readdir(join(dir, 'files'))).sort();
    expect(names).toHaveLength(2);
    expect(names.some((name) => name.includes('.tmp'))).toBe(false);
    const lines = (await readFile(join(dir, 'files', names[0] ?? ''), 'utf8')).trim().split('\n');
    expect(lines).toHaveLength(3);
    expect(JSON.parse(lines[0] ?? '')).toMatchObject({ source: 'a.txt', chunks: 2 });
    const [hit] = await sink.search([1, 1], { k: 1 });
    expect(hit?.score).toBeCloseTo(3, 6);
    await sink.close();
    // A fresh instance reads the same files back.
    expect(await new JsonlStore({ dir, table: 'files' }).count("chunk = 1")).toBe(1);
  });
});
