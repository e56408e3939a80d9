import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ChromaClient } from 'chromadb';
import pg from 'pg';
import { z } from 'zod';
import { S3Store } from '../../adapters/object-store/index.js';
import { IndexDeleted, IndexDocumentsPage, IndexStats, IndexTables } from '../../adapters/protocol/index-admin.js';
import { openIndexUri } from '../../adapters/stores/open.js';
import { startChromaServer, type ChromaServerHandle } from '../helpers/chroma-server.js';
import { FIXTURE_MODELS_DIR, TINY_MEAN } from '../helpers/nats-worker.js';
import { startPgliteServer, type PgliteServerHandle } from '../helpers/pglite-server.js';
import { startQdrantFake, type QdrantFakeHandle } from '../helpers/qdrant-fake.js';
import { startS3Server, type S3ServerHandle } from '../helpers/s3-server.js';
import { shoalInProcess, type InProcessRun } from '../helpers/shoal-in-process.js';

/**
 * `shoal index` on every store but LanceDB (index-admin-cli.test.ts), each filled by a real
 * `shoal ingest` (in process, the tiny fixture encoder) into two tables: pgvector (PGlite over
 * pglite-socket), Chroma (its own local server), Qdrant (the REST-contract server: no Qdrant runs
 * here), file:// and s3:// (s3rver). Per store: stats and tables give the counts the store's own
 * sink reads back, documents pages by source, delete removes a source's rows and state (checked
 * through the sink) and the next ingest indexes exactly that source again, an unknown table
 * names the tables there are, and another application's table in the same store is never listed.
 * Sizes are known where the store tells (PostgreSQL, files, S3).
 */

const BUCKET = 'admin-bucket';
const root = await mkdtemp(join(tmpdir(), 'shoal-index-stores-'));
const docs = join(root, 'docs');
const NAMES = ['a.txt', 'b.txt', 'c.txt'];
const sources = NAMES.map((name) => join(docs, name));
let postgres: PgliteServerHandle;
let chroma: ChromaServerHandle;
let qdrant: QdrantFakeHandle;
let s3: S3ServerHandle;

const Summary = z.object({ documents: z.object({ total: z.number(), ok: z.number(), failed: z.number(), unchanged: z.number() }) });

beforeAll(async () => {
  await mkdir(docs, { recursive: true });
  await writeFile(join(docs, 'a.txt'), 'Alpha notes about tide tables and harbour pilots.');
  await writeFile(join(docs, 'b.txt'), 'Beta notes about lighthouse lenses and the keepers who polish them every week.');
  await writeFile(join(docs, 'c.txt'), 'Gamma notes about buoys and channel marks.');
  [postgres, chroma, qdrant, s3] = await Promise.all([startPgliteServer(), startChromaServer(), startQdrantFake(), startS3Server([BUCKET])]);
}, 120_000);
afterAll(async () => {
  await Promise.all([postgres?.stop(), chroma?.stop(), qdrant?.stop(), s3?.stop()]);
  await rm(root, { recursive: true, force: true });
});

interface Store {
  name: string;
  /** The index URI; the table is given with --table. */
  uri: () => string;
  sized: boolean;
  env?: () => Record<string, string>;
  /** Puts something in the store that Shoal did not write (another application's table), which `tables` must leave out. */
  foreign: () => Promise<void>;
}

const STORES: readonly Store[] = [
  {
    name: 'pgvector', uri: () => postgres.url, sized: true,
    foreign: async () => {
      const client = new pg.Client({ host: '127.0.0.1', port: postgres.port, user: 'postgres', database: 'postgres' });
      await client.connect();
      await client.query('CREATE TABLE app_orders (id integer PRIMARY KEY)');
      await client.end();
    },
  },
  {
    name: 'chroma', uri: () => `chroma://127.0.0.1:${chroma.port}`, sized: false,
    foreign: async () => {
      await new ChromaClient({ host: '127.0.0.1', port: chroma.port, ssl: false }).createCollection({ name: 'app-notes', embeddingFunction: null });
    },
  },
  {
    name: 'qdrant', uri: () => `qdrant://127.0.0.1:${qdrant.port}`, sized: false,
    foreign: async () => {
      const response = await fetch(`http://127.0.0.1:${qdrant.port}/collections/app_points`, { method: 'PUT', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ vectors: { size: 4, distance: 'Dot' } }) });
      expect(response.status).toBe(200);
    },
  },
  { name: 'file', uri: () => `file://${join(root, 'jsonl')}`, sized: true, foreign: async () => {
    await mkdir(join(root, 'jsonl', 'app-files'), { recursive: true });
  } },
  {
    name: 's3', uri: () => `s3://${BUCKET}/idx`, sized: true, env: () => s3.env(),
    foreign: async () => {
      const store = new S3Store(s3.settings());
      await store.write({ bucket: BUCKET, key: 'idx/app-files/readme.txt' }, Buffer.from('not an index'));
      store.close();
    },
  },
];

describe.each(STORES)('shoal index on $name', (store) => {
  const env = (): Record<string, string> => ({ SHOAL_MODEL_DIR: FIXTURE_MODELS_DIR, ...store.env?.() });
  const run = (args: readonly string[]): Promise<InProcessRun> => shoalInProcess(args, { env: env() });
  const indexArgs = (table: string): string[] => ['--index', store.uri(), '--table', table];
  async function ingest(table: string): Promise<z.infer<typeof Summary>> {
    const done = await run(['ingest', '--no-progress', '--model', TINY_MEAN, ...indexArgs(table), '--json', docs]);
    expect(done.code, done.stderr).toBe(0);
    return Summary.parse(JSON.parse(done.stdout.trim().split('\n').at(-1) ?? '{}'));
  }
  async function json<S extends z.ZodType>(schema: S, args: readonly string[], table = 'docs'): Promise<z.output<S>> {
    const done = await run(['index', ...args, ...indexArgs(table), '--json']);
    expect(done.code, done.stderr).toBe(0);
    return schema.parse(JSON.parse(done.stdout));
  }
  /** Rows in all and per source, and the sources with a state, read through the table's own sink. */
  async function stored(table: string): Promise<{ rows: number; perSource: number[]; states: string[] }> {
    const credentials = store.name === 's3' ? { s3: s3.settings() } : {};
    const { store: sink } = openIndexUri(store.uri(), { table, ...credentials });
    try {
      const perSource: number[] = [];
      for (const source of sources) perSource.push(await sink.count(`source = '${source}'`));
      return { rows: await sink.count(), perSource, states: [...(await sink.states(sources)).keys()].sort() };
    } finally {
      await sink.close();
    }
  }

  it('stats, documents, tables, delete and re-ingest', async () => {
    expect((await ingest('docs')).documents.ok).toBe(NAMES.length);
    expect((await ingest('more')).documents.ok).toBe(NAMES.length);
    await store.foreign();
    const truth = await stored('docs');
    expect(truth.rows).toBeGreaterThanOrEqual(NAMES.length);

    const stats = await json(IndexStats, ['stats']);
    expect(stats).toMatchObject({ backend: store.name, table: 'docs', rows: truth.rows, documents: NAMES.length, distance: 'cosine', vector_type: 'float32' });
    expect(stats.model).toContain('tiny-bert-mean');
    if (store.sized) expect(stats.size_bytes).toBeGreaterThan(0);
    else expect(stats.size_bytes).toBeNull();
    expect(stats.last_ingested_at).not.toBeNull();

    const tables = await json(IndexTables, ['tables']);
    expect(tables.tables).toEqual([{ name: 'docs', rows: truth.rows }, { name: 'more', rows: (await stored('more')).rows }]);

    const page = await json(IndexDocumentsPage, ['documents', '--limit', '2', '--offset', '1']);
    expect(page).toMatchObject({ total: NAMES.length, offset: 1, limit: 2, next_offset: null });
    expect(page.documents.map((doc) => doc.source)).toEqual(sources.slice(1));
    expect(page.documents.map((doc) => doc.chunks)).toEqual(truth.perSource.slice(1));

    const victim = sources[1] ?? '';
    const deleted = await json(IndexDeleted, ['delete', victim]);
    expect(deleted).toMatchObject({ source: victim, documents: 1, chunks: truth.perSource[1] });
    const after = await stored('docs');
    expect(after.rows).toBe(truth.rows - (truth.perSource[1] ?? 0));
    expect(after.perSource[1]).toBe(0);
    expect(after.states).toEqual([sources[0], sources[2]]);
    // The other table is untouched.
    expect((await stored('more')).states).toEqual(sources);
    const again = await run(['index', 'delete', victim, ...indexArgs('docs')]);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain('[NOT_FOUND]');

    expect((await ingest('docs')).documents).toMatchObject({ ok: 1, unchanged: NAMES.length - 1, failed: 0 });
    expect(await stored('docs')).toEqual(truth);

    const missing = await run(['index', 'documents', ...indexArgs('dosc')]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain(`no table "dosc"`);
    expect(missing.stderr).toContain(`docs (${truth.rows} rows), more (`);
  }, 180_000);
});
