import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { IndexDeleted, IndexDocumentsPage, IndexStats, IndexTables } from '../../adapters/protocol/index-admin.js';
import { LanceDbStore } from '../../adapters/stores/lancedb/store.js';
import { FIXTURE_MODELS_DIR, TINY_MEAN } from '../helpers/nats-worker.js';
import { shoalInProcess, type InProcessRun } from '../helpers/shoal-in-process.js';

/**
 * `shoal index stats|documents|delete|tables` on a LanceDB index built by a real `shoal ingest`
 * (the command tree in process, the tiny fixture encoder): the counts are those the table holds
 * (read back through the sink), pages cut where they say, a deleted source loses its rows and
 * state and the next ingest indexes it again while the others stay unchanged, a second delete is
 * NOT_FOUND, and an unknown --table (in `shoal search` too) names the tables there are without
 * writing anything into the folder. The other stores: index-admin-stores.test.ts.
 */

const ENV = { SHOAL_MODEL_DIR: FIXTURE_MODELS_DIR };
const root = await mkdtemp(join(tmpdir(), 'shoal-index-admin-'));
const docs = join(root, 'docs');
const index = join(root, 'index');
const TEXTS: Record<string, string> = {
  'a.txt': 'Alpha notes about tide tables and harbour pilots.\n\nA second paragraph on moorings and the lock gates at the river mouth.',
  'b.txt': 'Beta notes about lighthouse lenses.',
  'c.md': '# Gamma\n\nGamma notes about buoys and channel marks.',
  'd.txt': 'Delta notes about the ferry timetable in winter.',
  'e.txt': 'Epsilon notes about the fish market on Saturdays.',
};
const sources = Object.keys(TEXTS).map((name) => join(docs, name)).sort();

const Summary = z.object({ documents: z.object({ total: z.number(), ok: z.number(), failed: z.number(), unchanged: z.number() }), chunks: z.number() });

function run(args: readonly string[], env: Record<string, string> = {}): Promise<InProcessRun> {
  return shoalInProcess(args, { env: { ...ENV, ...env } });
}

async function ingest(table = 'chunks'): Promise<z.infer<typeof Summary>> {
  const done = await run(['ingest', '--no-progress', '--model', TINY_MEAN, '--index', index, '--table', table, '--json', docs]);
  expect(done.code, done.stderr).toBe(0);
  return Summary.parse(JSON.parse(done.stdout.trim().split('\n').at(-1) ?? '{}'));
}

async function json<S extends z.ZodType>(schema: S, args: readonly string[], env: Record<string, string> = {}): Promise<z.output<S>> {
  const done = await run(['index', ...args, '--index', index, '--json'], env);
  expect(done.code, done.stderr).toBe(0);
  return schema.parse(JSON.parse(done.stdout));
}

/** Rows of each source and the sources with a state, read through the table's own sink. */
async function stored(table = 'chunks'): Promise<{ rows: number; perSource: number[]; states: string[] }> {
  const sink = new LanceDbStore({ dir: index, table });
  try {
    const perSource = [];
    for (const source of sources) perSource.push(await sink.count(`source = '${source}'`));
    return { rows: await sink.count(), perSource, states: [...(await sink.states(sources)).keys()].sort() };
  } finally {
    await sink.close();
  }
}

beforeAll(async () => {
  await mkdir(docs, { recursive: true });
  for (const [name, text] of Object.entries(TEXTS)) await writeFile(join(docs, name), text);
  const first = await ingest();
  expect(first.documents.ok).toBe(sources.length);
}, 120_000);
afterAll(() => rm(root, { recursive: true, force: true }));

describe('shoal index', () => {
  it('stats: the rows, documents, spec and size the table holds', async () => {
    const stats = await json(IndexStats, ['stats']);
    const truth = await stored();
    expect(stats.rows).toBe(truth.rows);
    expect(stats.rows).toBeGreaterThanOrEqual(sources.length);
    expect(stats).toMatchObject({ index, backend: 'lancedb', table: 'chunks', documents: sources.length, distance: 'cosine', vector_type: 'float32', optional_columns: [] });
    expect(stats.model).toBe(stats.metadata.model);
    expect(stats.model).toContain('tiny-bert-mean');
    expect(stats.dimension).toBeGreaterThan(0);
    // Counted apart from the code under test: the sizes of the files of both folders, as find lists them.
    const listed = execFileSync('find', [join(index, 'chunks.lance'), join(index, 'chunks__documents.lance'), '-type', 'f', '-printf', '%s\\n'], { encoding: 'utf8' });
    const onDisk = listed.split('\n').filter((line) => line !== '').reduce((sum, line) => sum + Number(line), 0);
    expect(stats.size_bytes).toBe(onDisk);
    expect(onDisk).toBeGreaterThan(0);
    expect(Date.parse(stats.last_ingested_at ?? '')).toBeGreaterThan(Date.now() - 10 * 60_000);

    const text = await run(['index', 'stats', '--index', index]);
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout).toMatch(new RegExp(`^rows +${stats.rows}$`, 'm'));
    expect(text.stdout).toMatch(new RegExp(`^documents +${sources.length}$`, 'm'));
  });

  it('documents: pages by source within their bounds, a prefix filter', async () => {
    const first = await json(IndexDocumentsPage, ['documents', '--limit', '2']);
    expect(first.total).toBe(sources.length);
    expect(first.documents.map((doc) => doc.source)).toEqual(sources.slice(0, 2));
    expect(first.next_offset).toBe(2);
    const last = await json(IndexDocumentsPage, ['documents', '--limit', '2', '--offset', '4']);
    expect(last.documents.map((doc) => doc.source)).toEqual(sources.slice(4));
    expect(last.next_offset).toBeNull();
    const all = await json(IndexDocumentsPage, ['documents']);
    expect(all.limit).toBe(100);
    expect(all.documents.reduce((sum, doc) => sum + doc.chunks, 0)).toBe((await stored()).rows);
    const beyond = await json(IndexDocumentsPage, ['documents', '--offset', '50']);
    expect(beyond).toMatchObject({ total: sources.length, documents: [], next_offset: null });
    const prefixed = await json(IndexDocumentsPage, ['documents', '--source-prefix', join(docs, 'c')]);
    expect(prefixed.documents.map((doc) => doc.source)).toEqual([join(docs, 'c.md')]);
    expect(prefixed.total).toBe(1);
    for (const bad of [['--limit', '0'], ['--limit', '1001'], ['--offset', '-1'], ['--limit', 'ten']]) {
      const refused = await run(['index', 'documents', '--index', index, ...bad]);
      expect(refused.code, bad.join(' ')).toBe(2);
      expect(refused.stderr).toContain(bad[0]);
    }
    const text = await run(['index', 'documents', '--index', index, '--limit', '2']);
    expect(text.stdout).toContain(`documents 1-2 of ${sources.length}`);
    expect(text.stdout).toContain('next page: --offset 2');
  });

  it('delete: rows and state go, a second delete is NOT_FOUND, the next ingest indexes the source again', async () => {
    const victim = join(docs, 'a.txt');
    const before = await stored();
    const rowsOfVictim = before.perSource[sources.indexOf(victim)] ?? 0;
    expect(rowsOfVictim).toBeGreaterThan(0);
    const deleted = await json(IndexDeleted, ['delete', victim]);
    expect(deleted).toEqual({ index, table: 'chunks', source: victim, documents: 1, chunks: rowsOfVictim });
    const after = await stored();
    expect(after.rows).toBe(before.rows - rowsOfVictim);
    expect(after.states).toEqual(sources.filter((source) => source !== victim));
    expect((await json(IndexStats, ['stats'])).documents).toBe(sources.length - 1);

    const again = await run(['index', 'delete', victim, '--index', index]);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain('[NOT_FOUND]');
    expect(again.stderr).toContain('a.txt');
    expect((await stored()).rows).toBe(after.rows);

    const reingest = await ingest();
    expect(reingest.documents).toMatchObject({ total: sources.length, ok: 1, unchanged: sources.length - 1, failed: 0 });
    const restored = await stored();
    expect(restored.rows).toBe(before.rows);
    expect(restored.states).toEqual(sources);
  }, 120_000);

  it('tables: every table with its rows; an unknown --table names them, in search too, and writes nothing', async () => {
    await ingest('notes');
    const tables = await json(IndexTables, ['tables']);
    const rows = (await stored()).rows;
    expect(tables).toEqual({ index, backend: 'lancedb', tables: [{ name: 'chunks', rows }, { name: 'notes', rows: (await stored('notes')).rows }] });
    const text = await run(['index', 'tables', '--index', index]);
    expect(text.stdout).toMatch(new RegExp(`^chunks +${rows} rows$`, 'm'));

    const entries = (await readdir(index)).sort();
    for (const args of [['index', 'stats'], ['index', 'documents'], ['index', 'delete', join(docs, 'b.txt')], ['search', 'tide tables']]) {
      const refused = await run([...args, '--index', index, '--table', 'chunkz']);
      expect(refused.code, args.join(' ')).toBe(1);
      expect(refused.stderr).toContain('[NOT_FOUND]');
      expect(refused.stderr).toContain('no table "chunkz"');
      expect(refused.stderr).toContain(`chunks (${rows} rows), notes (`);
    }
    expect((await readdir(index)).sort()).toEqual(entries);
    expect(existsSync(join(index, 'chunkz__documents.lance'))).toBe(false);

    const empty = join(root, 'empty');
    const none = await run(['index', 'stats', '--index', empty]);
    expect(none.code).toBe(1);
    expect(none.stderr).toContain('holds no tables yet');
    expect(existsSync(empty)).toBe(false);
  }, 120_000);

  it('--index takes a name of SHOAL_INDEXES, in search too', async () => {
    const done = await run(['index', 'stats', '--index', 'docs', '--json'], { SHOAL_INDEXES: `docs=${index},other=/nowhere` });
    expect(done.code, done.stderr).toBe(0);
    const stats = IndexStats.parse(JSON.parse(done.stdout));
    expect(stats.index).toBe(index);
    expect(stats.rows).toBe((await stored()).rows);
    // shoal search resolves the name the same way.
    const search = await run(['search', 'lighthouse lenses', '--index', 'docs', '--k', '1'], { SHOAL_INDEXES: `docs=${index}` });
    expect(search.code, search.stderr).toBe(0);
    expect(z.object({ rank: z.literal(1), source: z.string() }).parse(JSON.parse(search.stdout)).source.startsWith(docs)).toBe(true);
  });
});
