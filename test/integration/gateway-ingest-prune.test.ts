import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import * as lancedb from '@lancedb/lancedb';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startIngestGateway, type IngestGateway } from '../helpers/ingest-gateway.js';
import { z } from 'zod';
import { eventually, natsServerAvailable, NATS_SERVER_MISSING } from '../helpers/nats-server.js';
import { TINY_MEAN, uniquePrefix } from '../helpers/nats-worker.js';

/**
 * POST /v1/ingest with `"prune": true`, end to end through the gateway app, a private nats-server
 * and one in-process worker in the parse role: a `file://` folder is walked, a file deleted from
 * it keeps its rows on a re-ingest without prune and loses rows and state with it, the run's
 * status says how many (`removed`), and files, inline records and folders outside the file
 * roots are never pruned (the semantics of `shoal ingest --prune`).
 */

const FILES: Record<string, string> = {
  'harbor.txt': 'The harbor master counts forty fishing boats every morning before sunrise.',
  'orchard.txt': 'Apple trees in the northern orchard bloom two weeks later than the southern ones.',
  'comet.txt': 'A faint comet crossed the constellation of Orion during the second week of March.',
};
const NOTE = { id: 'note-1', text: 'The lighthouse lamp turns once every twelve seconds through the night.' };

const Row = z.object({ source: z.string() });

/** The distinct sources of the chunk rows and of the state rows. */
async function sourcesOf(index: string): Promise<{ rows: string[]; states: string[] }> {
  const db = await lancedb.connect(index);
  const read = async (name: string): Promise<string[]> => {
    const table = await db.openTable(name);
    const rows = z.array(Row).parse(await table.query().select(['source']).toArray());
    table.close();
    return [...new Set(rows.map((row) => row.source))].sort();
  };
  const out = { rows: await read('chunks'), states: await read('chunks__documents') };
  db.close();
  return out;
}

describe.skipIf(!natsServerAvailable())('gateway: POST /v1/ingest with prune', () => {
  let root: string;
  let folder: string;
  let index: string;
  let gateway: IngestGateway | undefined;
  let app: FastifyInstance;
  const prefix = uniquePrefix('gwprune');
  const uri = (name: string): string => pathToFileURL(join(folder, name)).href;

  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), 'shoal-gw-prune-'));
    folder = join(root, 'files', 'notes');
    await mkdir(folder, { recursive: true });
    for (const [name, text] of Object.entries(FILES)) await writeFile(join(folder, name), text);
    index = join(root, 'index');
    gateway = await startIngestGateway({ prefix, indexes: { docs: index }, fileRoots: [join(root, 'files')], servedModelsOnly: false });
    app = gateway.app;
  }, 120_000);

  afterAll(async () => {
    await gateway?.close();
    await rm(root, { recursive: true, force: true });
  }, 60_000);

  /** Posts an ingest job and waits for its final status. */
  async function run(jobId: string, payload: Record<string, unknown>): Promise<Record<string, unknown>> {
    const response = await app.inject({ method: 'POST', url: '/v1/ingest', payload: { index: 'docs', model: TINY_MEAN, job_id: jobId, ...payload } });
    expect(response.statusCode, response.body).toBe(202);
    let final: Record<string, unknown> = {};
    await eventually(async () => {
      const status = await app.inject({ method: 'GET', url: `/v1/jobs/${jobId}` });
      expect(status.statusCode).toBe(200);
      final = z.record(z.string(), z.unknown()).parse(status.json());
      expect(final.state).toBe('completed');
    }, 60_000);
    return final;
  }

  it(natsServerAvailable() ? 'deletes the rows and state of a file gone from an ingested folder only with prune, and reports removed' : NATS_SERVER_MISSING, async () => {
    const folderRef = { ref: pathToFileURL(folder).href };
    const first = await run('prune-1', { sources: [folderRef, NOTE] });
    expect(first).toMatchObject({ documents: { total: 4, ok: 4, failed: 0, unchanged: 0 }, removed: 0 });
    const all = [uri('comet.txt'), uri('harbor.txt'), NOTE.id, uri('orchard.txt')].sort();
    expect(await sourcesOf(index)).toEqual({ rows: all, states: all });

    await rm(join(folder, 'orchard.txt'));
    // Without prune the rows of the deleted file stay.
    const kept = await run('prune-2', { sources: [folderRef] });
    expect(kept).toMatchObject({ documents: { total: 2, ok: 0, failed: 0, unchanged: 2 }, removed: 0 });
    expect(await sourcesOf(index)).toEqual({ rows: all, states: all });

    // With prune they go; the other files and the inline record (never under a folder) stay.
    const pruned = await run('prune-3', { sources: [folderRef], prune: true });
    expect(pruned).toMatchObject({ documents: { total: 2, ok: 0, failed: 0, unchanged: 2 }, removed: 1 });
    const left = [uri('comet.txt'), uri('harbor.txt'), NOTE.id].sort();
    expect(await sourcesOf(index)).toEqual({ rows: left, states: left });
    const search = await app.inject({ method: 'POST', url: '/v1/search', payload: { query: FILES['orchard.txt'], index: 'docs', k: 5 } });
    expect(search.statusCode, search.body).toBe(200);
    const hits = z.object({ hits: z.array(z.object({ source: z.string() })) }).parse(search.json()).hits;
    expect(hits.map((hit) => hit.source).sort()).toEqual(left);

    // Files named one by one are never a root: a deleted one keeps its rows even with prune.
    await rm(join(folder, 'comet.txt'));
    const files = await run('prune-4', { sources: [{ ref: uri('harbor.txt') }], prune: true });
    expect(files).toMatchObject({ documents: { total: 1, unchanged: 1 }, removed: 0 });
    expect(await sourcesOf(index)).toEqual({ rows: left, states: left });
  }, 240_000);

  it('refuses a non-boolean prune, a folder outside the file roots and a folder reference with an id', async () => {
    const outside = await mkdtemp(join(tmpdir(), 'shoal-gw-outside-'));
    try {
      for (const payload of [
        { index: 'docs', sources: [{ ref: pathToFileURL(folder).href }], prune: 'yes' },
        { index: 'docs', sources: [{ id: 'x', ref: pathToFileURL(folder).href }], prune: true },
      ]) {
        const response = await app.inject({ method: 'POST', url: '/v1/ingest', payload });
        expect(response.statusCode, JSON.stringify(payload)).toBe(422);
        expect(response.json()).toMatchObject({ error: { code: 'INVALID_INPUT' } });
      }
      // Outside the roots the folder is not even looked at: the reference is refused with the request, as a job's would be (no run).
      const status = await app.inject({ method: 'POST', url: '/v1/ingest', payload: { index: 'docs', model: TINY_MEAN, sources: [{ ref: pathToFileURL(outside).href }], prune: true, job_id: 'prune-outside' } });
      expect(status.statusCode, status.body).toBe(422);
      expect(status.json()).toMatchObject({ error: { code: 'INVALID_INPUT', message: expect.stringContaining('outside the allowed file roots') } });
      expect((await app.inject({ method: 'GET', url: '/v1/jobs/prune-outside' })).statusCode).toBe(404);
    } finally {
      await rm(outside, { recursive: true, force: true });
    }
  }, 120_000);
});
