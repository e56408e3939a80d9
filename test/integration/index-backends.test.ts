import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as lancedb from '@lancedb/lancedb';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { startPgliteServer, type PgliteServerHandle } from '../helpers/pglite-server.js';
import { FIXTURES_DIR } from '../helpers/shared.js';
import { parseJsonl, runShoal } from '../helpers/shoal-cli.js';

/**
 * `shoal ingest --index URI` and `shoal search --index URI` through the real CLI (each run is a
 * process with a model load, so few runs): PostgreSQL (PGlite on a loopback port) is down when
 * the ingest starts and comes back 3 s later — the run retries and completes with every row; a
 * second run adds nothing; the rows are exactly those of an undisturbed LanceDB run, and the same
 * query ranks the same ids with the same scores. Every backend's rankings on identical rows
 * (Chroma and Qdrant included) are compared in process by sink-rankings.test.ts.
 */

const MODEL = join(FIXTURES_DIR, 'models', 'tiny-bert-mean');
const root = await mkdtemp(join(tmpdir(), 'shoal-backends-'));
const docs = join(root, 'docs');
let postgres: PgliteServerHandle;

const Summary = z.object({ documents: z.object({ total: z.number(), ok: z.number(), unchanged: z.number(), failed: z.number() }), chunks: z.number(), index: z.string() });
const Hit = z.object({ rank: z.number(), score: z.number(), id: z.string(), source: z.string() });

const NOTES = [
  'The harbor master counts forty fishing boats every morning before sunrise.',
  'Apple trees in the northern orchard bloom two weeks later than the southern ones.',
  'A faint comet crossed the constellation of Orion during the second week of March.',
  'The bakery on Elm Street sells rye bread, croissants and a famous cardamom bun.',
  'Measurements show the glacier retreated eleven meters over the last summer season.',
  'The river ferry stops running when the water level drops below two meters.',
  'Bread dough rises faster in a warm kitchen than in a cold cellar.',
  'Night-sky observers reported a bright meteor shower over the northern hills.',
];

beforeAll(async () => {
  await mkdir(docs);
  await Promise.all(NOTES.map((text, i) => writeFile(join(docs, `note-${i}.txt`), text)));
  postgres = await startPgliteServer();
}, 120_000);
afterAll(async () => {
  await postgres?.stop();
  await rm(root, { recursive: true, force: true });
});

async function ingest(index: string): Promise<z.output<typeof Summary>> {
  const run = await runShoal(['ingest', '--no-progress', '--json', '--model', MODEL, '--index', index, docs]);
  expect(run.code, run.stderr).toBe(0);
  return Summary.parse(JSON.parse(run.stdout));
}

async function search(index: string, query: string, extra: string[] = []): Promise<z.output<typeof Hit>[]> {
  const run = await runShoal(['search', query, '--index', index, '--k', '5', ...extra]);
  expect(run.code, run.stderr).toBe(0);
  return parseJsonl(run.stdout, Hit);
}

describe('--index URI through the CLI', () => {
  it('an ingest that finds PostgreSQL down retries and completes once it is back; re-runs add nothing; rows and rankings match LanceDB', async () => {
    const pgIndex = `${postgres.url}?table=notes`;
    await postgres.halt();
    const running = runShoal(['ingest', '--no-progress', '--json', '--model', MODEL, '--index', pgIndex, docs]);
    await new Promise((resolve) => setTimeout(resolve, 3_000));
    await postgres.start();
    const done = await running;
    expect(done.code, done.stderr).toBe(0);
    const first = Summary.parse(JSON.parse(done.stdout));
    expect(first.documents).toMatchObject({ total: NOTES.length, ok: NOTES.length, failed: 0 });
    expect(first.chunks).toBe(NOTES.length);
    expect(first.index).toBe(pgIndex);
    expect((await ingest(pgIndex)).documents).toMatchObject({ ok: 0, unchanged: NOTES.length });

    const lance = join(root, 'lance');
    await ingest(lance);
    // Exactly the rows of the undisturbed LanceDB run: same ids, same count.
    const client = new pg.Client({ host: '127.0.0.1', port: postgres.port, user: 'postgres', database: 'postgres' });
    await client.connect();
    const pgIds = (await client.query<{ id: string }>('SELECT id FROM notes ORDER BY id')).rows.map((row) => row.id);
    await client.end();
    const db = await lancedb.connect(lance);
    const table = await db.openTable('chunks');
    const lanceIds = (await table.query().select(['id']).toArray()).map((row: { id: string }) => row.id).sort();
    table.close();
    db.close();
    expect(pgIds).toHaveLength(NOTES.length);
    expect(pgIds).toEqual(lanceIds);

    const query = 'bread from the bakery';
    const reference = await search(lance, query);
    expect(reference).toHaveLength(5);
    for (const index of [pgIndex]) {
      const hits = await search(index, query);
      expect(hits).toHaveLength(reference.length);
      hits.forEach((hit, at) => {
        const want = reference[at];
        expect(hit.score, index).toBeCloseTo(want?.score ?? Number.NaN, 4);
        // Another id at a rank only in a tie (equal scores within float32 noise).
        if (hit.id !== want?.id) expect(Math.abs(hit.score - (want?.score ?? Number.NaN))).toBeLessThan(1e-5);
      });
    }
  }, 300_000);
});
