import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ShoalMetrics } from '../../adapters/observability/metrics.js';
import { LanceDbStore } from '../../adapters/stores/lancedb/store.js';
import { searchIndex } from '../../pipelines/documents/search.js';
import type { InferenceEngine } from '../../pipelines/inference/engine.js';
import { buildGatewayApp } from '../../services/gateway/app.js';
import { MemoryJobs, TEST_SETTINGS } from '../helpers/gateway.js';
import { FIXTURE_MODELS_DIR, TINY_MEAN, referenceEngine } from '../helpers/nats-worker.js';
import { runShoal } from '../helpers/shoal-cli.js';

/**
 * Readers that live longer than one write: the gateway serving POST /v1/search on an index that
 * did not exist when it started, and a LanceDbStore held open (as `shoal sink` and library users
 * hold theirs) while another process, the real `shoal ingest`, creates the table and then adds
 * rows to it. Both must see the table and every row committed by the other process, at the next
 * request or call, with no restart.
 */

const ENV = { SHOAL_MODEL_DIR: FIXTURE_MODELS_DIR };
const FIRST: Record<string, string> = {
  'harbor.txt': 'The harbor master counts forty fishing boats every morning before sunrise.',
  'orchard.txt': 'Apple trees in the northern orchard bloom two weeks later than the southern ones.',
};
const LATER: Record<string, string> = {
  'comet.txt': 'A faint comet crossed the constellation of Orion during the second week of March.',
  'bakery.txt': 'The bakery on Elm Street sells rye bread, croissants and a famous cardamom bun.',
};

const Hits = z.object({ hits: z.array(z.object({ rank: z.number(), score: z.number(), source: z.string(), text: z.string() })) });

async function writeFolder(dir: string, files: Record<string, string>): Promise<void> {
  await mkdir(dir, { recursive: true });
  for (const [name, text] of Object.entries(files)) await writeFile(join(dir, name), text);
}

/** `shoal ingest DIR --index INDEX` in its own process. */
async function ingestFrom(dir: string, index: string): Promise<void> {
  const run = await runShoal(['ingest', dir, '--no-progress', '--model', TINY_MEAN, '--index', index, '--json'], { env: ENV });
  expect(run.code, run.stderr).toBe(0);
}

describe('index readers see what another process wrote after they opened it', () => {
  let root: string;
  let index: string;
  let engine: InferenceEngine;
  let app: FastifyInstance;
  let held: LanceDbStore;

  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), 'shoal-freshness-'));
    index = join(root, 'index');
    // An empty folder: the index exists, no table yet.
    await mkdir(index);
    await writeFolder(join(root, 'first'), FIRST);
    await writeFolder(join(root, 'later'), LATER);
    engine = referenceEngine();
    app = buildGatewayApp(
      { engine, jobs: new MemoryJobs(), models: async () => [], metrics: new ShoalMetrics(), ready: async () => ({ ready: true }) },
      { ...TEST_SETTINGS, indexes: { late: index } },
    );
    held = new LanceDbStore({ dir: index });
  }, 60_000);

  afterAll(async () => {
    await held?.close();
    await app?.close();
    await engine?.close();
    await rm(root, { recursive: true, force: true });
  }, 60_000);

  const search = async (query: string): Promise<{ statusCode: number; body: string }> =>
    app.inject({ method: 'POST', url: '/v1/search', payload: { query, index: 'late', k: 10 } });
  const top = async (query: string): Promise<z.infer<typeof Hits>['hits']> => {
    const response = await search(query);
    expect(response.statusCode, response.body).toBe(200);
    return Hits.parse(JSON.parse(response.body)).hits;
  };
  /** Sources of the held sink's hits, best first (the search `shoal search` runs). */
  const heldSearch = async (query: string, k: number): Promise<string[]> =>
    (await searchIndex(engine, held, { query, k, where: 'the held index' })).map((hit) => hit.row.source);

  it('the gateway answers "nothing ingested yet", then the rows of a later ingest, then rows added after that', async () => {
    const empty = await search(FIRST['harbor.txt'] ?? '');
    expect(empty.statusCode, empty.body).toBe(404);
    expect(JSON.parse(empty.body)).toMatchObject({ error: { code: 'NOT_FOUND', message: expect.stringContaining('nothing ingested into index late yet') } });
    // The held sink, opened on the same empty index, reads it as empty too.
    expect(await held.describe()).toBeNull();
    expect(await held.count()).toBe(0);

    await ingestFrom(join(root, 'first'), index);
    const afterFirst = await top(FIRST['harbor.txt'] ?? '');
    expect(afterFirst.map((hit) => hit.source).sort()).toEqual(Object.keys(FIRST).map((name) => join(root, 'first', name)).sort());
    expect(afterFirst[0]).toMatchObject({ source: join(root, 'first', 'harbor.txt'), text: FIRST['harbor.txt'] });

    await ingestFrom(join(root, 'later'), index);
    const afterLater = await top(LATER['comet.txt'] ?? '');
    expect(afterLater).toHaveLength(4);
    expect(afterLater[0]).toMatchObject({ source: join(root, 'later', 'comet.txt'), text: LATER['comet.txt'] });
  }, 180_000);

  it('a sink held open since before the table existed sees the table and every row added since', async () => {
    // The previous test created the table and added rows from other processes while `held` stayed open.
    expect(await held.describe()).toMatchObject({ dimension: expect.any(Number) });
    expect(await held.count()).toBe(4);
    const sources = [...Object.keys(FIRST).map((name) => join(root, 'first', name)), ...Object.keys(LATER).map((name) => join(root, 'later', name))];
    expect([...(await held.states(sources)).keys()].sort()).toEqual([...sources].sort());
    const hits = await heldSearch(LATER['bakery.txt'] ?? '', 10);
    expect(hits).toHaveLength(4);
    expect(hits[0]).toBe(join(root, 'later', 'bakery.txt'));

    // Once it has read the table, rows another process adds must show at its next read too.
    await writeFolder(join(root, 'last'), { 'mill.txt': 'An old water mill still grinds barley for the village bakery.' });
    await ingestFrom(join(root, 'last'), index);
    expect(await held.count()).toBe(5);
    expect((await held.statesUnder(join(root, 'last'))).map((state) => state.source)).toEqual([join(root, 'last', 'mill.txt')]);
    expect(await heldSearch('An old water mill still grinds barley for the village bakery.', 1)).toEqual([join(root, 'last', 'mill.txt')]);
  }, 180_000);
});
