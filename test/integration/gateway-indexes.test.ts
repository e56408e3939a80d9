import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ErrorCode } from '../../adapters/protocol/errors.js';
import { IndexDeleted, IndexDocumentsPage, IndexList, IndexStats, IndexTables } from '../../adapters/protocol/index-admin.js';
import { sqlString, validateFilter } from '../../adapters/stores/shared/filter.js';
import { openIndexUri } from '../../adapters/stores/open.js';
import type { ChunkRow, DocumentState } from '../../adapters/stores/store.js';
import { generator } from '../fixtures/build/random.js';
import { ErrorBody, localGateway, ScriptedEngine } from '../helpers/gateway.js';
import { unitVector } from '../helpers/seeded-vectors.js';

/**
 * The gateway's /v1/indexes routes with tokens: every route refuses a call without the token
 * (401), the configured names are listed without their paths, stats/documents/tables answer the
 * counts the stores hold (a LanceDB folder and a file:// index), pages stay within their bounds,
 * a source with spaces, `&`, `#`, a quote and non-ASCII is deleted by its %-encoded `?source=` (rows and
 * state, checked through the sink) and a second delete is 404, an unknown index is 404 naming the
 * configured ones, and an index whose configured table does not exist is 404 naming its tables.
 */

const TOKEN = 'index-routes-token-0123456789abcdef';
const DIM = 8;
const root = await mkdtemp(join(tmpdir(), 'shoal-gateway-indexes-'));
const lance = join(root, 'lance');
const files = join(root, 'files');
const ODD = "s3://bucket/reports 2024/Q1 & Q2 #draft/O'Brien résumé?v=1.pdf";
const SOURCES = ['/docs/a.txt', '/docs/b.txt', '/docs/sub/c.txt', '/other/d.txt', ODD].sort();
const CHUNKS = [3, 1, 2, 1, 4];
let app: FastifyInstance;

const next = generator(7);
function contents(): { rows: ChunkRow[]; states: DocumentState[] } {
  const rows: ChunkRow[] = [];
  const states: DocumentState[] = SOURCES.map((source, s) => {
    const chunks = CHUNKS[s] ?? 1;
    for (let c = 0; c < chunks; c++) {
      rows.push({ id: `${s}:${c}`, document_id: `h${s}`, source, page: 1, chunk: c, text: `chunk ${c} of ${source}`, start: 0, end: 10, heading: null, settings: 'v1', vector: Array.from(unitVector(next, DIM)), entities: null, labels: null, ingested_at: `2026-03-0${s + 1}T10:00:00.000Z` });
    }
    return { source, document_id: `h${s}`, settings: 'v1', chunks, pages: 1, ingested_at: `2026-03-0${s + 1}T10:00:00.000Z` };
  });
  return { rows, states };
}

async function fill(uri: string): Promise<void> {
  const { store: sink } = openIndexUri(uri);
  await sink.prepare({ dimension: DIM, distance: 'dot', optionalColumns: [], metadata: { model: 'org/tiny', pipeline: 'documents' } });
  const { rows, states } = contents();
  await sink.commit(rows, states);
  await sink.close();
}

beforeAll(async () => {
  await fill(lance);
  await fill(`file://${files}`);
  app = localGateway(ScriptedEngine.failing(ErrorCode.INTERNAL), {
    apiTokens: [TOKEN],
    indexes: { docs: lance, notes: `file://${files}`, typo: `lancedb://${lance}?table=chunkz` },
  });
  await app.ready();
}, 60_000);
afterAll(async () => {
  await app?.close();
  await rm(root, { recursive: true, force: true });
});

const auth = { authorization: `Bearer ${TOKEN}` };

async function get(url: string): Promise<{ status: number; body: unknown }> {
  const response = await app.inject({ method: 'GET', url, headers: auth });
  return { status: response.statusCode, body: response.json() };
}

describe('/v1/indexes', () => {
  it('every route needs the token', async () => {
    const calls = [['GET', '/v1/indexes'], ['GET', '/v1/indexes/docs/stats'], ['GET', '/v1/indexes/docs/documents'], ['GET', '/v1/indexes/docs/tables'], ['DELETE', `/v1/indexes/docs/documents?source=${encodeURIComponent(SOURCES[0] ?? '')}`]] as const;
    for (const [method, url] of calls) {
      for (const headers of [{}, { authorization: 'Bearer wrong-token' }]) {
        const response = await app.inject({ method, url, headers });
        expect(response.statusCode, `${method} ${url}`).toBe(401);
        expect(ErrorBody.parse(response.json()).error.code).toBe(ErrorCode.UNAUTHORIZED);
      }
    }
    // Nothing was deleted by the refused call.
    expect(IndexStats.parse((await get('/v1/indexes/docs/stats')).body).documents).toBe(SOURCES.length);
  });

  it('lists the configured names with backend and table, never their paths', async () => {
    const { status, body } = await get('/v1/indexes');
    expect(status).toBe(200);
    expect(IndexList.parse(body)).toEqual({ indexes: [{ name: 'docs', backend: 'lancedb', table: 'chunks' }, { name: 'notes', backend: 'file', table: 'chunks' }, { name: 'typo', backend: 'lancedb', table: 'chunkz' }] });
    expect(JSON.stringify(body)).not.toContain(root);
  });

  it.each(['docs', 'notes'])('stats and tables of %s: the counts the store holds', async (name) => {
    const stats = IndexStats.parse((await get(`/v1/indexes/${name}/stats`)).body);
    const rows = CHUNKS.reduce((a, b) => a + b, 0);
    expect(stats).toMatchObject({ index: name, table: 'chunks', rows, documents: SOURCES.length, dimension: DIM, distance: 'dot', vector_type: 'float32', model: 'org/tiny', metadata: { model: 'org/tiny', pipeline: 'documents' }, last_ingested_at: `2026-03-0${SOURCES.length}T10:00:00.000Z` });
    expect(stats.size_bytes).toBeGreaterThan(0);
    expect(IndexTables.parse((await get(`/v1/indexes/${name}/tables`)).body).tables).toEqual([{ name: 'chunks', rows }]);
  });

  it('documents: pages by source, a %-encoded prefix, bounds refused', async () => {
    const first = IndexDocumentsPage.parse((await get('/v1/indexes/docs/documents?limit=2')).body);
    expect(first.documents.map((doc) => doc.source)).toEqual(SOURCES.slice(0, 2));
    expect(first).toMatchObject({ total: SOURCES.length, offset: 0, limit: 2, next_offset: 2 });
    const rest = IndexDocumentsPage.parse((await get('/v1/indexes/docs/documents?limit=2&offset=4')).body);
    expect(rest.documents.map((doc) => doc.source)).toEqual(SOURCES.slice(4));
    expect(rest.next_offset).toBeNull();
    const all = IndexDocumentsPage.parse((await get('/v1/indexes/docs/documents')).body);
    expect(all.documents.map((doc) => doc.chunks)).toEqual(CHUNKS);
    const prefixed = IndexDocumentsPage.parse((await get(`/v1/indexes/docs/documents?source_prefix=${encodeURIComponent('s3://bucket/reports 2024/Q1 & ')}`)).body);
    expect(prefixed.documents.map((doc) => doc.source)).toEqual([ODD]);
    for (const query of ['limit=0', 'limit=1001', 'offset=-1', 'limit=2.5', 'page=2', `source_prefix=${'x'.repeat(2_001)}`]) {
      const { status, body } = await get(`/v1/indexes/docs/documents?${query}`);
      expect(status, query).toBe(422);
      expect(ErrorBody.parse(body).error.code).toBe(ErrorCode.INVALID_INPUT);
    }
  });

  it('DELETE removes the rows and state of a %-encoded source; again is 404; the other index keeps it', async () => {
    const url = `/v1/indexes/docs/documents?source=${encodeURIComponent(ODD)}`;
    const response = await app.inject({ method: 'DELETE', url, headers: auth });
    expect(response.statusCode, response.body).toBe(200);
    expect(IndexDeleted.parse(response.json())).toEqual({ index: 'docs', table: 'chunks', source: ODD, documents: 1, chunks: CHUNKS[SOURCES.indexOf(ODD)] });
    const { store: sink } = openIndexUri(lance);
    expect(await sink.count(validateFilter(`source = ${sqlString(ODD)}`))).toBe(0);
    expect((await sink.states([ODD])).size).toBe(0);
    expect(await sink.count()).toBe(CHUNKS.reduce((a, b) => a + b, 0) - (CHUNKS[SOURCES.indexOf(ODD)] ?? 0));
    await sink.close();
    const again = await app.inject({ method: 'DELETE', url, headers: auth });
    expect(again.statusCode).toBe(404);
    expect(ErrorBody.parse(again.json()).error.details).toMatchObject({ source: ODD });
    expect(IndexStats.parse((await get('/v1/indexes/notes/stats')).body).documents).toBe(SOURCES.length);
    const missing = await app.inject({ method: 'DELETE', url: '/v1/indexes/docs/documents', headers: auth });
    expect(missing.statusCode).toBe(422);
  });

  it('an unknown index is 404 naming the configured ones; a configured table that does not exist names the tables', async () => {
    const unknown = await get('/v1/indexes/nope/stats');
    expect(unknown.status).toBe(404);
    expect(ErrorBody.parse(unknown.body).error.details).toMatchObject({ configured: ['docs', 'notes', 'typo'] });
    const typo = await get('/v1/indexes/typo/documents');
    expect(typo.status).toBe(404);
    const error = ErrorBody.parse(typo.body).error;
    expect(error.message).toContain('no table "chunkz" in typo');
    expect(error.details).toMatchObject({ table: 'chunkz', tables: ['chunks'] });
    expect(error.message).not.toContain(root);
    for (const url of ['/v1/indexes/..%2F..%2Fetc/stats', '/v1/indexes/a%20b/tables']) {
      expect((await get(url)).status, url).toBe(422);
    }
    // Counted per configured index; names nobody configured stay `other`.
    const metrics = (await app.inject({ method: 'GET', url: '/metrics' })).body;
    expect(metrics).toMatch(/shoal_requests_total\{primitive="index",model="docs",code="OK"\} [1-9]/);
    expect(metrics).toMatch(/shoal_requests_total\{primitive="index",model="other",code="NOT_FOUND"\} [1-9]/);
    expect(metrics).not.toContain('model="nope"');
  });
});
