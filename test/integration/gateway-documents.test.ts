import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as lancedb from '@lancedb/lancedb';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startIngestGateway, type IngestGateway } from '../helpers/ingest-gateway.js';
import { z } from 'zod';
import { eventually, natsServerAvailable, NATS_SERVER_MISSING } from '../helpers/nats-server.js';
import { FIXTURE_MODELS_DIR, TINY_MEAN, uniquePrefix } from '../helpers/nats-worker.js';
import { jsonl, parseJsonl, runShoal } from '../helpers/shoal-cli.js';

/**
 * POST /v1/search and POST /v1/ingest on the gateway, with real parts: an index built by the real
 * `shoal ingest`, the in-process engine behind the app for queries, and for ingest a private
 * nats-server with one in-process worker in the parse role. Search answers must be exactly the
 * lines `shoal search` prints for the same index; an ingest job's rows must be those of
 * `shoal ingest` of the same records; indexes are names from the settings, never paths.
 */

const ENV = { SHOAL_MODEL_DIR: FIXTURE_MODELS_DIR };
const NOTES: Record<string, string> = {
  'harbor.txt': 'The harbor master counts forty fishing boats every morning before sunrise.',
  'orchard.txt': 'Apple trees in the northern orchard bloom two weeks later than the southern ones.\n\nThe orchard keeper records the first blossom every spring.',
  'comet.txt': 'A faint comet crossed the constellation of Orion during the second week of March.',
  'bakery.txt': 'The bakery on Elm Street sells rye bread, croissants and a famous cardamom bun.',
};
const RECORDS = [
  { id: 'river', text: 'The river floods the lower meadows each April after the snow melts.' },
  { id: 'lamp', text: 'The lighthouse lamp turns once every twelve seconds through the night.' },
  { id: 'mill', text: 'An old water mill still grinds barley for the village bakery.' },
];

const Hit = z.strictObject({ rank: z.number(), score: z.number(), id: z.string(), document_id: z.string(), source: z.string(), page: z.number(), text: z.string(), heading: z.string().nullable(), chunk: z.number(), start: z.number(), end: z.number(), metadata: z.record(z.string(), z.unknown()).nullable() });
const Hits = z.strictObject({ hits: z.array(Hit) });

/** Rows without their write time, sorted by id. */
async function readRows(index: string): Promise<{ id: string; source: string; text: string; page: number; document_id: string }[]> {
  const db = await lancedb.connect(index);
  const table = await db.openTable('chunks');
  const rows = z.array(z.object({ id: z.string(), source: z.string(), text: z.string(), page: z.number(), document_id: z.string() })).parse(await table.query().toArray());
  table.close();
  db.close();
  return rows.map(({ id, source, text, page, document_id }) => ({ id, source, text, page, document_id })).sort((a, b) => (a.id < b.id ? -1 : 1));
}

describe.skipIf(!natsServerAvailable())('gateway: POST /v1/search and POST /v1/ingest', () => {
  let root: string;
  let notesIndex: string;
  let gateway: IngestGateway | undefined;
  let app: FastifyInstance;
  const prefix = uniquePrefix('gwdocs');

  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), 'shoal-gw-docs-'));
    const folder = join(root, 'notes');
    await mkdir(folder);
    for (const [name, text] of Object.entries(NOTES)) await writeFile(join(folder, name), text);
    notesIndex = join(root, 'notes-index');
    const built = await runShoal(['ingest', folder, '--no-progress', '--model', TINY_MEAN, '--index', notesIndex, '--json'], { env: ENV });
    expect(built.code, built.stderr).toBe(0);

    // The gateway's gate (on by default): jobs (and ingest runs) only for models some worker serves, for that operation.
    gateway = await startIngestGateway({ prefix, indexes: { notes: notesIndex, fresh: join(root, 'fresh-index'), meta: join(root, 'meta-index') } });
    app = gateway.app;
  }, 120_000);

  afterAll(async () => {
    await gateway?.close();
    await rm(root, { recursive: true, force: true });
  }, 60_000);

  const search = (payload: Record<string, unknown>) => app.inject({ method: 'POST', url: '/v1/search', payload });

  it(natsServerAvailable() ? 'answers exactly the hits `shoal search` prints for the same index, query, k and filter' : NATS_SERVER_MISSING, async () => {
    const cases = [
      { query: 'fishing boats at the harbor', k: 3 },
      { query: 'orchard blossom', k: 10, filter: "source LIKE '%orchard%' AND page = 1" },
    ];
    for (const query of cases) {
      const response = await search({ ...query, index: 'notes' });
      expect(response.statusCode, response.body).toBe(200);
      const hits = Hits.parse(response.json()).hits;
      const cli = await runShoal(['search', query.query, '--index', notesIndex, '--k', String(query.k), ...(query.filter === undefined ? [] : ['--filter', query.filter])], { env: ENV });
      expect(cli.code, cli.stderr).toBe(0);
      const printed = parseJsonl(cli.stdout, Hit);
      expect(hits).toEqual(printed);
      expect(hits.length).toBe(query.filter === undefined ? 3 : printed.length);
      expect(hits.map((hit) => hit.rank)).toEqual(hits.map((_, i) => i + 1));
    }
  }, 60_000);

  it('refuses unknown or path-like indexes, unbounded k and queries, and bad filters', async () => {
    const unknown = await search({ query: 'x', index: 'other' });
    expect(unknown.statusCode).toBe(404);
    expect(unknown.json()).toMatchObject({ error: { code: 'NOT_FOUND', details: { configured: ['notes', 'fresh', 'meta'] } } });
    for (const body of [
      { query: 'x', index: '../notes-index' },
      { query: 'x', index: notesIndex },
      { query: 'x', index: 'notes', k: 5000 },
      { query: 'x', index: 'notes', k: 0 },
      { query: 'x'.repeat(5000), index: 'notes' },
      { query: '   ', index: 'notes' },
      { query: 'x', index: 'notes', filter: 'vector = 1' },
      { query: 'x', index: 'notes', filter: "source = 'a'; DROP TABLE chunks" },
      { query: 'x', index: 'notes', extra: true },
    ]) {
      const response = await search(body);
      expect(response.statusCode, JSON.stringify(body).slice(0, 80)).toBe(422);
      expect(response.json()).toMatchObject({ error: { code: 'INVALID_INPUT' } });
    }
  });

  it('runs an ingest job on the workers: 202, status under /v1/jobs/:id, the rows of `shoal ingest`, then searchable', async () => {
    const response = await app.inject({ method: 'POST', url: '/v1/ingest', payload: { index: 'fresh', sources: RECORDS, model: TINY_MEAN, job_id: 'ingest-fresh-1' } });
    expect(response.statusCode, response.body).toBe(202);
    expect(response.headers.location).toBe('/v1/jobs/ingest-fresh-1');
    expect(response.json()).toMatchObject({ job_id: 'ingest-fresh-1', status: { kind: 'ingest', index: 'fresh' } });
    await eventually(async () => {
      const status = await app.inject({ method: 'GET', url: '/v1/jobs/ingest-fresh-1' });
      expect(status.statusCode).toBe(200);
      expect(status.json()).toMatchObject({ kind: 'ingest', state: 'completed', documents: { total: 3, ok: 3, failed: 0, unchanged: 0 }, chunks: 3 });
    }, 60_000);
    // The coordinator's bookkeeping stays inside (docs/http.md), in the status and in the POST answer.
    const bookkeeping = ['lease', 'heartbeat_at', 'heartbeat_ms', 'content_hash', 'counted_seq'];
    const read = z.record(z.string(), z.unknown()).parse((await app.inject({ method: 'GET', url: '/v1/jobs/ingest-fresh-1' })).json());
    expect(Object.keys(read).filter((key) => bookkeeping.includes(key))).toEqual([]);
    expect(Object.keys(z.looseObject({ status: z.record(z.string(), z.unknown()) }).parse(response.json()).status).filter((key) => bookkeeping.includes(key))).toEqual([]);

    // The same records through the CLI in process: the same rows (ids are content and settings hashes).
    const cliIndex = join(root, 'cli-index');
    const cli = await runShoal(['ingest', '-', '--no-progress', '--model', TINY_MEAN, '--index', cliIndex, '--json'], { env: ENV, stdin: jsonl(RECORDS) });
    expect(cli.code, cli.stderr).toBe(0);
    const cliRows = await readRows(cliIndex);
    expect(await readRows(join(root, 'fresh-index'))).toEqual(cliRows);
    for (const record of RECORDS) {
      const top = Hits.parse((await search({ query: record.text, index: 'fresh', k: 1 })).json()).hits[0];
      expect(top).toMatchObject({ source: record.id, text: record.text, id: cliRows.find((row) => row.source === record.id)?.id });
      expect(top?.score).toBeGreaterThan(0.999);
    }

    // The same job id again answers the same run and starts nothing new.
    const again = await app.inject({ method: 'POST', url: '/v1/ingest', payload: { index: 'fresh', sources: RECORDS, model: TINY_MEAN, job_id: 'ingest-fresh-1' } });
    expect(again.statusCode).toBe(202);
    expect(again.json()).toMatchObject({ status: { state: 'completed' } });

    // An ingest run has no results stream: said as such, not "no job with id".
    const results = await app.inject({ method: 'GET', url: '/v1/jobs/ingest-fresh-1/results' });
    expect(results.statusCode).toBe(400);
    expect(results.json()).toMatchObject({ error: { code: 'UNSUPPORTED_OPERATION', message: expect.stringContaining('is an ingest run'), details: { kind: 'ingest', index: 'fresh' } } });

    // One namespace of job ids: another kind of job cannot take the run's id (it would hide it).
    const job = await app.inject({ method: 'POST', url: '/v1/jobs', payload: { primitive: 'encode', request: { model: TINY_MEAN, items: ['a'] }, job_id: 'ingest-fresh-1' } });
    const classify = await app.inject({ method: 'POST', url: '/v1/classify', payload: { model: TINY_MEAN, labels: ['a', 'b'], items: ['x'], mode: 'job', job_id: 'ingest-fresh-1' } });
    for (const taken of [job, classify]) {
      expect(taken.statusCode, taken.body).toBe(409);
      expect(taken.json()).toMatchObject({ error: { code: 'JOB_CONFLICT', message: 'job id "ingest-fresh-1" already names an ingest run; choose another job_id', details: { kind: 'ingest' } } });
    }
    expect((await app.inject({ method: 'GET', url: '/v1/jobs/ingest-fresh-1' })).json()).toMatchObject({ kind: 'ingest', state: 'completed' });
  }, 120_000);

  it('stores the metadata of ingest sources, returns it with /v1/search hits and filters on it', async () => {
    // Files ingested by the CLI carry their automatic metadata.
    const notes = Hits.parse((await search({ query: 'harbor', index: 'notes', k: 10, filter: "metadata.mime = 'text/plain' AND metadata.size < 80" })).json()).hits;
    expect(notes.map((hit) => hit.source.split('/').at(-1)).sort()).toEqual(Object.entries(NOTES).filter(([, text]) => Buffer.byteLength(text) < 80).map(([name]) => name).sort());
    for (const hit of notes) expect(hit.metadata).toMatchObject({ mime: 'text/plain', size: Buffer.byteLength(NOTES[hit.source.split('/').at(-1) ?? ''] ?? '') });

    const sources = [
      { id: 'm-old', text: 'Ferry timetables from the old harbour office.', metadata: { year: 2018, tag: ['ferry'] } },
      { id: 'm-new', text: 'New ferry routes across the bay since spring.', metadata: { year: 2024, tag: ['ferry', 'routes'], title: 'Routes' } },
      { id: 'm-none', text: 'A ferry without any metadata at all.' },
    ];
    const bad = await app.inject({ method: 'POST', url: '/v1/ingest', payload: { index: 'meta', sources: [{ id: 'x', text: 'x', metadata: { 'not a key': 1 } }], model: TINY_MEAN } });
    expect(bad.statusCode, bad.body).toBe(422);
    expect(bad.json()).toMatchObject({ error: { code: 'INVALID_INPUT', message: expect.stringContaining('metadata field "not a key" is not a name') } });
    const started = await app.inject({ method: 'POST', url: '/v1/ingest', payload: { index: 'meta', sources, model: TINY_MEAN, job_id: 'ingest-meta-1' } });
    expect(started.statusCode, started.body).toBe(202);
    await eventually(async () => {
      const status = await app.inject({ method: 'GET', url: '/v1/jobs/ingest-meta-1' });
      expect(status.json()).toMatchObject({ state: 'completed', documents: { total: 3, ok: 3, failed: 0 } });
    }, 60_000);
    const found = async (filter?: string): Promise<z.infer<typeof Hit>[]> => {
      const response = await search({ query: 'ferry', index: 'meta', k: 10, ...(filter === undefined ? {} : { filter }) });
      expect(response.statusCode, response.body).toBe(200);
      return Hits.parse(response.json()).hits;
    };
    const all = await found();
    expect(Object.fromEntries(all.map((hit) => [hit.source, hit.metadata]))).toEqual({ 'm-old': sources[0]?.metadata, 'm-new': sources[1]?.metadata, 'm-none': null });
    expect((await found('metadata.year >= 2020')).map((hit) => hit.source)).toEqual(['m-new']);
    expect((await found("metadata.tag IN ('ferry') AND metadata.year < 2020")).map((hit) => hit.source)).toEqual(['m-old']);
    expect((await found('metadata.title IS NULL')).map((hit) => hit.source).sort()).toEqual(['m-none', 'm-old']);
    const refused = await search({ query: 'ferry', index: 'meta', filter: "metadata.title LIKE 'R%'" });
    expect(refused.statusCode).toBe(422);
    expect(refused.json()).toMatchObject({ error: { code: 'INVALID_INPUT', message: expect.stringContaining('LIKE is for the stored text columns') } });
  }, 120_000);

  it('refuses ingest requests naming a path, a pipeline file or an unknown index', async () => {
    const bodies = [
      { index: '/tmp/x', sources: RECORDS },
      { index: 'fresh', sources: RECORDS, pipeline: '../pipelines/evil.yaml' },
      { index: 'fresh', sources: [] },
      { index: 'fresh', sources: [{ id: 'a', path: '/etc/passwd' }] },
      { index: 'fresh', sources: [{ ref: 'http://example.com/a.pdf' }] },
      { index: 'fresh', sources: [...RECORDS, RECORDS[0]] },
    ];
    for (const payload of bodies) {
      const response = await app.inject({ method: 'POST', url: '/v1/ingest', payload });
      expect(response.statusCode, JSON.stringify(payload).slice(0, 80)).toBe(422);
    }
    const unknown = await app.inject({ method: 'POST', url: '/v1/ingest', payload: { index: 'nope', sources: RECORDS } });
    expect(unknown.statusCode).toBe(404);
    // Models no worker serves for encode: refused at submit, not a run that fails later. No model
    // given means the pipeline's default (all-MiniLM-L6-v2), which these workers do not serve.
    for (const model of ['no-such-model', undefined]) {
      const refused = await app.inject({ method: 'POST', url: '/v1/ingest', payload: { index: 'fresh', sources: RECORDS, ...(model === undefined ? {} : { model }) } });
      expect(refused.statusCode, refused.body).toBe(404);
      expect(refused.json()).toMatchObject({ error: { code: 'MODEL_NOT_FOUND' } });
    }

    // The OCR model is loaded by the parse workers' own engine, which would fetch any hub id it is
    // given: one that is neither built in nor served for extract is refused at submit too.
    const ocr = await app.inject({
      method: 'POST',
      url: '/v1/ingest',
      payload: { index: 'fresh', sources: RECORDS, pipeline: { name: 'p', stages: { parse: { ocr: 'always', ocrModel: 'someone/unserved-ocr' }, encode: { model: TINY_MEAN } } } },
    });
    expect(ocr.statusCode, ocr.body).toBe(404);
    expect(ocr.json()).toMatchObject({ error: { code: 'MODEL_NOT_FOUND' } });

    const missing = await app.inject({ method: 'GET', url: '/v1/jobs/no-such-run' });
    expect(missing.statusCode).toBe(404);
  });
});
