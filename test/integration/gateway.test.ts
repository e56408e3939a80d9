import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import OpenAI from 'openai';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ShoalMetrics } from '../../adapters/observability/metrics.js';
import { ERROR_TRAITS, ErrorCode } from '../../adapters/protocol/errors.js';
import { LanceDbStore } from '../../adapters/stores/lancedb/store.js';
import { InferenceEngine } from '../../pipelines/inference/engine.js';
import { buildGatewayApp } from '../../services/gateway/app.js';
import type { GatewayDeps, GatewaySettings } from '../../services/gateway/context.js';
import { resolveGatewayConfig } from '../../services/gateway/config.js';
import { RETRY_AFTER_SECONDS } from '../../services/gateway/errors.js';
import { expectAllClose } from '../helpers/conformance.js';
import { ErrorBody, MemoryJobs, ScriptedEngine, TEST_SETTINGS } from '../helpers/gateway.js';
import { FIXTURES_DIR } from '../helpers/shared.js';
import { firstTokenLogit, hiddenStates, l2Normalize, loadTinyModel, meanPool, sigmoid, tokenOutputs } from '../helpers/tiny-model.js';

/**
 * The HTTP gateway over the in-process engine and the committed fixture models: every route, the
 * error contract (status from the code table, `{error: {code, message, details}}`, Retry-After),
 * auth, limits, metrics, and real clients (the npm `openai` package, plain fetch for TEI) against
 * a listening server. Expected vectors and scores are recomputed from the fixtures' weights.
 */

const MODELS_DIR = join(FIXTURES_DIR, 'models');
const ATOL = 2e-5;
const bert = loadTinyModel('tiny-bert-mean');
const cross = loadTinyModel('tiny-cross-encoder');
const wrap = (...tokens: string[]): string[] => ['[CLS]', ...tokens, '[SEP]'];
const embedding = (tokens: string[]): number[] => l2Normalize(meanPool(tokenOutputs(bert, { ids: bert.ids(tokens) })));
function rerankScore(query: string, passage: string): number {
  const first = wrap(...query.split(' '));
  const second = [...passage.split(' '), '[SEP]'];
  const types = [...first.map(() => 0), ...second.map(() => 1)];
  return sigmoid(firstTokenLogit(cross, hiddenStates(cross, { ids: cross.ids([...first, ...second]), types })));
}

const TEXTS = ['a dog', 'the cat sat on the mat.'];
const EXPECTED = [embedding(wrap('a', 'dog')), embedding(wrap('the', 'cat', 'sat', 'on', 'the', 'mat', '.'))];
const LONG_TEXT = Array.from({ length: 5 }, () => 'the big red dog runs to the old house by the river').join(' ');
const QUERY = 'where do cats live';
const PASSAGES = ['the dog runs in the park', 'cats live in houses', 'fish live in the river'];

const EncodeBody = z.looseObject({
  model: z.string(),
  items: z.array(z.looseObject({ index: z.number(), dense: z.array(z.number()) })),
  usage: z.strictObject({ items: z.number(), tokens: z.number() }),
});

let engine: InferenceEngine;
let metrics: ShoalMetrics;
const jobs = new MemoryJobs();
let ready = true;

function deps(overrides: Partial<GatewayDeps> = {}): GatewayDeps {
  return {
    engine,
    jobs,
    models: async () => [{ id: 'tiny-bert-mean', family: 'dense', primitives: ['encode', 'score'] }, { id: 'tiny-cross-encoder', family: 'cross-encoder', primitives: ['score'] }],
    metrics,
    ready: async () => (ready ? { ready: true } : { ready: false, reason: 'no worker answers yet' }),
    ...overrides,
  };
}

function gateway(overrides: Partial<GatewayDeps> = {}, settings: Partial<GatewaySettings> = {}): FastifyInstance {
  return buildGatewayApp(deps(overrides), { ...TEST_SETTINGS, ...settings });
}

function errorOf(body: string): z.infer<typeof ErrorBody>['error'] {
  return ErrorBody.parse(JSON.parse(body)).error;
}

let app: FastifyInstance;
beforeAll(async () => {
  engine = new InferenceEngine({
    sources: { modelDirs: [MODELS_DIR], allowDownload: false },
    runtime: { intraOpThreads: 1 },
    interactiveSessions: false,
  });
  metrics = new ShoalMetrics({ processMetrics: false });
  app = gateway();
  await app.ready();
});
afterAll(async () => {
  await app.close();
  await engine.close();
});

describe('primitives', () => {
  it('POST /v1/encode returns the fixture model embeddings, in request order, with token usage', async () => {
    const response = await app.inject({ method: 'POST', url: '/v1/encode', payload: { model: 'tiny-bert-mean', items: TEXTS } });
    expect(response.statusCode).toBe(200);
    const body = EncodeBody.parse(response.json());
    expect(body.items.map((item) => item.index)).toEqual([0, 1]);
    body.items.forEach((item, i) => expectAllClose(item.dense, EXPECTED[i] ?? [], ATOL, TEXTS[i]));
    expect(body.usage).toEqual({ items: 2, tokens: 4 + 9 });
  });

  it('POST /v1/score ranks passages with the cross-encoder, best first', async () => {
    const response = await app.inject({ method: 'POST', url: '/v1/score', payload: { model: 'tiny-cross-encoder', query: QUERY, items: PASSAGES } });
    expect(response.statusCode).toBe(200);
    const body = z.looseObject({ scores: z.array(z.strictObject({ index: z.number(), score: z.number() })) }).parse(response.json());
    const expected = PASSAGES.map((p) => rerankScore(QUERY, p));
    const order = [0, 1, 2].sort((a, b) => (expected[b] ?? 0) - (expected[a] ?? 0));
    expect(body.scores.map((s) => s.index)).toEqual(order);
    for (const s of body.scores) expect(Math.abs(s.score - (expected[s.index] ?? Number.NaN))).toBeLessThanOrEqual(ATOL);
  });

  it('POST /v1/extract answers what the engine answers in-process', async () => {
    const request = { model: 'tiny-ner', items: ['John lives in Berlin', 'the cat sat on the mat.'] };
    const response = await app.inject({ method: 'POST', url: '/v1/extract', payload: request });
    expect(response.statusCode).toBe(200);
    const direct = await engine.extract(request);
    expect(response.json()).toEqual(JSON.parse(JSON.stringify(direct)));
    expect(direct.items).toHaveLength(2);
  });

  it('POST /v1/tokenize returns the WordPiece tokens', async () => {
    const response = await app.inject({ method: 'POST', url: '/v1/tokenize', payload: { model: 'tiny-bert-mean', items: ['a dog'] } });
    expect(response.statusCode).toBe(200);
    expect(response.json()).toMatchObject({ items: [{ index: 0, tokens: wrap('a', 'dog'), ids: bert.ids(wrap('a', 'dog')), truncated: false }] });
  });

  it('takes one raw image as the body of /v1/extract and /v1/encode, fields in the query string', async () => {
    const png = await sharp({ create: { width: 40, height: 30, channels: 3, background: { r: 220, g: 30, b: 40 } } }).png().toBuffer();
    const viaJson = await app.inject({
      method: 'POST',
      url: '/v1/extract',
      payload: { model: 'tiny-image-classifier', top_k: 3, items: [{ id: 'photo', image: { base64: png.toString('base64') } }] },
    });
    expect(viaJson.statusCode).toBe(200);
    const raw = await app.inject({ method: 'POST', url: '/v1/extract?model=tiny-image-classifier&top_k=3&id=photo', headers: { 'content-type': 'image/png' }, payload: png });
    expect(raw.statusCode).toBe(200);
    expect(raw.json()).toEqual(viaJson.json());
    expect(z.looseObject({ items: z.array(z.looseObject({ id: z.string(), labels: z.array(z.unknown()) })) }).parse(raw.json()).items[0]?.labels).toHaveLength(3);

    const encoded = await app.inject({ method: 'POST', url: '/v1/encode?model=tiny-clip', headers: { 'content-type': 'application/octet-stream' }, payload: png });
    expect(encoded.statusCode).toBe(200);
    const direct = await engine.encode({ model: 'tiny-clip', items: [{ image: new Uint8Array(png) }] });
    expectAllClose(EncodeBody.parse(encoded.json()).items[0]?.dense ?? [], direct.items[0]?.dense ?? [], 1e-6, 'clip image');

    const noModel = await app.inject({ method: 'POST', url: '/v1/extract?top_k=3', headers: { 'content-type': 'image/png' }, payload: png });
    expect(noModel.statusCode).toBe(422);
    expect(ErrorBody.parse(noModel.json()).error.message).toMatch(/query string[\s\S]*model/);
    const empty = await app.inject({ method: 'POST', url: '/v1/extract?model=tiny-image-classifier', headers: { 'content-type': 'image/png' }, payload: Buffer.alloc(0) });
    expect(empty.statusCode).toBe(422);
    const corrupt = await app.inject({ method: 'POST', url: '/v1/extract?model=tiny-image-classifier', headers: { 'content-type': 'image/png' }, payload: Buffer.from('not a png at all') });
    expect(corrupt.statusCode).toBe(422);
    expect(ErrorBody.parse(corrupt.json()).error.code).toBe('INVALID_INPUT');
  });

  it('GET /v1/models lists the models in the OpenAI shape', async () => {
    const response = await app.inject({ method: 'GET', url: '/v1/models' });
    expect(response.json()).toEqual({
      object: 'list',
      data: [
        { id: 'tiny-bert-mean', family: 'dense', primitives: ['encode', 'score'], object: 'model', created: 0, owned_by: 'shoal' },
        { id: 'tiny-cross-encoder', family: 'cross-encoder', primitives: ['score'], object: 'model', created: 0, owned_by: 'shoal' },
      ],
    });
  });
});

describe('errors', () => {
  it('names every bad field of an invalid request (422 INVALID_INPUT)', async () => {
    const response = await app.inject({ method: 'POST', url: '/v1/encode', payload: { model: 'tiny-bert-mean', items: [], colour: 'red' } });
    expect(response.statusCode).toBe(422);
    const error = errorOf(response.body);
    expect(error.code).toBe('INVALID_INPUT');
    expect(error.message).toContain('items: items must not be empty');
    expect(error.message).toContain('colour');
    expect(error.details?.issues).toEqual(expect.arrayContaining([expect.objectContaining({ path: ['items'] })]));
  });

  it('refuses a body that is not JSON (422) and one without a JSON content type (415)', async () => {
    const broken = await app.inject({ method: 'POST', url: '/v1/encode', headers: { 'content-type': 'application/json' }, payload: '{"model": "x", items: [' });
    expect(broken.statusCode).toBe(422);
    expect(errorOf(broken.body)).toMatchObject({ code: 'INVALID_INPUT', message: expect.stringContaining('not valid JSON') });
    for (const type of ['text/plain', 'application/x-www-form-urlencoded']) {
      const form = await app.inject({ method: 'POST', url: '/v1/encode', headers: { 'content-type': type }, payload: 'hello=1' });
      expect(form.statusCode, type).toBe(415);
      expect(errorOf(form.body)).toMatchObject({ code: 'UNSUPPORTED_MEDIA_TYPE', message: expect.stringContaining('Content-Type: application/json') });
    }
    const empty = await app.inject({ method: 'POST', url: '/v1/score' });
    expect([empty.statusCode, errorOf(empty.body).message]).toEqual([422, 'the request body is empty: send a JSON object with Content-Type: application/json']);
  });

  it('refuses a binary body on a JSON route with a short 415 before reading it (it once listed every byte as an unknown key)', async () => {
    const bytes = Buffer.alloc(2 * 1024 * 1024, 7);
    for (const [url, type] of [['/v1/score', 'application/octet-stream'], ['/v1/search', 'image/png'], ['/v1/embeddings', 'application/octet-stream'], ['/v1/jobs', 'image/jpeg']] as const) {
      const response = await app.inject({ method: 'POST', url, headers: { 'content-type': type }, payload: bytes });
      expect(response.statusCode, url).toBe(415);
      expect(response.body.length, url).toBeLessThan(400);
      expect(errorOf(response.body)).toMatchObject({ code: 'UNSUPPORTED_MEDIA_TYPE', message: `${url} takes JSON: send Content-Type: application/json (raw image bodies go to /v1/encode and /v1/extract)` });
    }
    const gzip = await app.inject({ method: 'POST', url: '/v1/encode', headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' }, payload: bytes });
    expect([gzip.statusCode, errorOf(gzip.body).message]).toEqual([415, 'Content-Encoding gzip is not accepted: send the body uncompressed']);
  });

  it('keeps a message about a huge object short: every issue is capped', async () => {
    const wide = Object.fromEntries(Array.from({ length: 2_000 }, (_, index) => [`k${index}`, index]));
    const response = await app.inject({ method: 'POST', url: '/v1/score', payload: { model: 'm', query: 'q', items: ['x'], ...wide } });
    expect(response.statusCode).toBe(422);
    expect(response.body.length).toBeLessThan(4_000);
    expect(errorOf(response.body).message).toMatch(/^invalid score request: \(root\): Unrecognized keys: "k0", "k1", .*… \(\d+ more characters\)$/);
  });

  it('answers a known route called with another method 405 with Allow', async () => {
    const response = await app.inject({ method: 'GET', url: '/v1/encode' });
    expect([response.statusCode, response.headers.allow]).toEqual([405, 'POST']);
    expect(errorOf(response.body)).toMatchObject({ code: 'METHOD_NOT_ALLOWED', message: 'GET /v1/encode: use POST' });
    // GET lists the jobs, POST submits one.
    const jobs = await app.inject({ method: 'DELETE', url: '/v1/jobs' });
    expect([jobs.statusCode, jobs.headers.allow]).toEqual([405, 'GET, POST']);
  });

  it('refuses a body over the size limit with 413 INPUT_TOO_LARGE', async () => {
    const payload = { model: 'tiny-bert-mean', items: ['x'.repeat(TEST_SETTINGS.bodyLimitBytes)] };
    const response = await app.inject({ method: 'POST', url: '/v1/encode', payload });
    expect(response.statusCode).toBe(413);
    expect(errorOf(response.body)).toMatchObject({ code: 'INPUT_TOO_LARGE', details: { limitBytes: TEST_SETTINGS.bodyLimitBytes } });
  });

  it('answers 404 MODEL_NOT_FOUND for a model no source has, and 404 NOT_FOUND for an unknown route', async () => {
    const model = await app.inject({ method: 'POST', url: '/v1/encode', payload: { model: 'nobody/no-such-model', items: ['x'] } });
    expect(model.statusCode).toBe(404);
    expect(errorOf(model.body).code).toBe('MODEL_NOT_FOUND');
    const route = await app.inject({ method: 'POST', url: '/v1/embed-everything', payload: {} });
    expect(route.statusCode).toBe(404);
    expect(errorOf(route.body)).toMatchObject({ code: 'NOT_FOUND', message: 'no route POST /v1/embed-everything' });
  });

  it('sends Retry-After with retryable codes: OVERLOADED 429, MODEL_LOADING 503, a hinted delay wins', async () => {
    const overloaded = gateway({ engine: ScriptedEngine.failing(ErrorCode.OVERLOADED) });
    const loading = gateway({ engine: ScriptedEngine.failing(ErrorCode.MODEL_LOADING, { retryAfterSeconds: 12.2 }) });
    const rejected = gateway({ engine: ScriptedEngine.failing(ErrorCode.UNSUPPORTED_OPERATION) });
    try {
      const payload = { model: 'm', items: ['x'] };
      const a = await overloaded.inject({ method: 'POST', url: '/v1/encode', payload });
      expect([a.statusCode, a.headers['retry-after'], errorOf(a.body).code]).toEqual([429, '1', 'OVERLOADED']);
      const b = await loading.inject({ method: 'POST', url: '/v1/score', payload: { model: 'm', query: 'q', items: ['x'] } });
      expect([b.statusCode, b.headers['retry-after'], errorOf(b.body).code]).toEqual([503, '13', 'MODEL_LOADING']);
      const c = await rejected.inject({ method: 'POST', url: '/v1/extract', payload });
      expect([c.statusCode, c.headers['retry-after'], errorOf(c.body).code]).toEqual([400, undefined, 'UNSUPPORTED_OPERATION']);
    } finally {
      await Promise.all([overloaded.close(), loading.close(), rejected.close()]);
    }
  });

  it('gives Retry-After only to retryable codes', () => {
    for (const code of Object.values(ErrorCode)) {
      if (RETRY_AFTER_SECONDS[code] !== null) expect(ERROR_TRAITS[code].retryable, code).toBe(true);
    }
  });

  it('answers 504 TIMEOUT when a call outlives the request timeout, and aborts the call', async () => {
    const hanging = ScriptedEngine.hanging();
    const slow = gateway({ engine: hanging }, { requestTimeoutMs: 50 });
    try {
      const response = await slow.inject({ method: 'POST', url: '/v1/encode', payload: { model: 'm', items: ['x'] } });
      expect(response.statusCode).toBe(504);
      expect(errorOf(response.body)).toMatchObject({ code: 'TIMEOUT', details: { timeoutMs: 50 } });
      expect(response.headers['retry-after']).toBe('1');
      expect(hanging.signals.map((s) => s.aborted)).toEqual([true]);
    } finally {
      await slow.close();
    }
  });
});

describe('authentication', () => {
  const TOKEN = 'test-token-0123456789abcdef';
  let secured: FastifyInstance;
  beforeAll(async () => {
    secured = gateway({}, { apiTokens: ['another-token-000000000000', TOKEN] });
    await secured.ready();
  });
  afterAll(async () => secured.close());

  const encode = (headers: Record<string, string>) =>
    secured.inject({ method: 'POST', url: '/v1/tokenize', headers, payload: { model: 'tiny-bert-mean', items: ['a dog'] } });

  it('refuses requests without a valid bearer token (401, WWW-Authenticate) and serves those with one', async () => {
    const missing = await encode({});
    expect([missing.statusCode, errorOf(missing.body).code, missing.headers['www-authenticate']]).toEqual([401, 'UNAUTHORIZED', 'Bearer realm="shoal"']);
    const wrong = await encode({ authorization: `Bearer ${TOKEN}x` });
    expect(wrong.statusCode).toBe(401);
    expect(errorOf(wrong.body).message).toBe('the bearer token is not valid');
    const right = await encode({ authorization: `Bearer ${TOKEN}` });
    expect(right.statusCode).toBe(200);
  });

  it('keeps probes open, /metrics open unless configured, and routes unchanged when auth is off', async () => {
    expect((await secured.inject({ method: 'GET', url: '/healthz' })).statusCode).toBe(200);
    expect((await secured.inject({ method: 'GET', url: '/readyz' })).statusCode).toBe(200);
    expect((await secured.inject({ method: 'GET', url: '/metrics' })).statusCode).toBe(200);
    const strict = gateway({}, { apiTokens: [TOKEN], protectMetrics: true });
    try {
      expect((await strict.inject({ method: 'GET', url: '/metrics' })).statusCode).toBe(401);
      expect((await strict.inject({ method: 'GET', url: '/metrics', headers: { authorization: `Bearer ${TOKEN}` } })).statusCode).toBe(200);
    } finally {
      await strict.close();
    }
    expect((await app.inject({ method: 'GET', url: '/v1/models' })).statusCode).toBe(200);
  });
});

describe('probes, metrics and CORS', () => {
  it('/healthz is always ok; /readyz follows readiness with 503 UNAVAILABLE and Retry-After', async () => {
    expect((await app.inject({ method: 'GET', url: '/healthz' })).json()).toEqual({ status: 'ok' });
    ready = false;
    try {
      const response = await app.inject({ method: 'GET', url: '/readyz' });
      expect([response.statusCode, response.headers['retry-after']]).toEqual([503, '5']);
      expect(errorOf(response.body)).toMatchObject({ code: 'UNAVAILABLE', message: 'not ready: no worker answers yet' });
    } finally {
      ready = true;
    }
    expect((await app.inject({ method: 'GET', url: '/readyz' })).json()).toEqual({ status: 'ready' });
  });

  it('/metrics counts requests by primitive, model and code', async () => {
    const counted = new ShoalMetrics({ processMetrics: false });
    const local = gateway({ metrics: counted });
    try {
      for (let i = 0; i < 2; i++) await local.inject({ method: 'POST', url: '/v1/encode', payload: { model: 'tiny-bert-mean', items: ['a dog'] } });
      await local.inject({ method: 'POST', url: '/v1/encode', payload: { model: 'nobody/missing', items: ['x'] } });
      await local.inject({ method: 'POST', url: '/embed', payload: { inputs: 'a dog' } });
      const text = (await local.inject({ method: 'GET', url: '/metrics' })).body;
      expect(text).toContain('shoal_requests_total{primitive="encode",model="tiny-bert-mean",code="OK"} 3');
      expect(text).toContain('shoal_requests_total{primitive="encode",model="other",code="MODEL_NOT_FOUND"} 1');
      expect(text).toContain('shoal_request_seconds_count{primitive="encode",lane="interactive"} 4');
    } finally {
      await local.close();
    }
  });

  it('/metrics counts search, classify and job reads under their own primitives, never an unknown index or job id as a label', async () => {
    const root = mkdtempSync(join(tmpdir(), 'shoal-gw-metrics-'));
    const index = join(root, 'index');
    // A one-row index, as `shoal ingest` would leave it, so a search succeeds.
    const sink = new LanceDbStore({ dir: index });
    try {
      const vector = EXPECTED[0] ?? [];
      await sink.prepare({ dimension: vector.length, distance: 'cosine', optionalColumns: [], metadata: { model: 'tiny-bert-mean' } });
      const now = new Date(0).toISOString();
      await sink.commit(
        [{ id: 'd1:0', document_id: 'd1', source: 'dog.txt', page: 1, chunk: 0, text: 'a dog', start: 0, end: 5, heading: null, settings: 's', vector, entities: null, labels: null, ingested_at: now }],
        [{ source: 'dog.txt', document_id: 'd1', settings: 's', chunks: 1, pages: 1, ingested_at: now }],
      );
    } finally {
      await sink.close();
    }
    const counted = new ShoalMetrics({ processMetrics: false });
    const local = gateway({ metrics: counted, jobs: new MemoryJobs() }, { indexes: { docs: index }, classify: { syncItems: 4, resultsDir: join(root, 'classify'), cacheDir: null } });
    const post = (url: string, payload: Record<string, unknown>) => local.inject({ method: 'POST', url, payload });
    try {
      expect((await post('/v1/search', { query: 'a dog', index: 'docs', k: 1 })).statusCode).toBe(200);
      expect((await post('/v1/search', { query: 'a dog', index: 'nowhere', k: 1 })).statusCode).toBe(404);
      expect((await post('/v1/classify', { model: 'tiny-bert-mean', items: ['a dog'], labels: ['animal', 'furniture'] })).statusCode).toBe(200);
      expect((await post('/v1/classify', { model: 'nobody/missing', items: ['a dog'], labels: ['animal', 'furniture'] })).statusCode).toBe(404);
      // Accepted before its model is loaded: the unchecked name must not become a label.
      const classifyJob = await post('/v1/classify', { model: 'no-such-model', items: ['a dog'], labels: ['animal', 'furniture'], mode: 'job' });
      expect(classifyJob.statusCode).toBe(202);
      const job = await post('/v1/jobs', { primitive: 'encode', request: { model: 'tiny-bert-mean', items: ['a dog'] } });
      expect(job.statusCode).toBe(202);
      const jobId = z.looseObject({ job_id: z.string() }).parse(job.json()).job_id;
      expect((await local.inject({ method: 'GET', url: `/v1/jobs/${jobId}` })).statusCode).toBe(200);
      // Still queued: UNAVAILABLE, counted under the job's model.
      expect((await local.inject({ method: 'GET', url: `/v1/jobs/${jobId}/results` })).statusCode).toBe(503);
      expect((await local.inject({ method: 'GET', url: '/v1/jobs/never-submitted' })).statusCode).toBe(404);
      const classifyJobId = z.looseObject({ job_id: z.string() }).parse(classifyJob.json()).job_id;
      expect((await local.inject({ method: 'GET', url: `/v1/jobs/${classifyJobId}` })).statusCode).toBe(200);

      const text = (await local.inject({ method: 'GET', url: '/metrics' })).body;
      const series = text.split('\n').filter((line) => line.startsWith('shoal_requests_total{'));
      expect(series.sort()).toEqual(
        [
          'shoal_requests_total{primitive="search",model="docs",code="OK"} 1',
          'shoal_requests_total{primitive="search",model="other",code="NOT_FOUND"} 1',
          'shoal_requests_total{primitive="classify",model="tiny-bert-mean",code="OK"} 1',
          'shoal_requests_total{primitive="classify",model="other",code="MODEL_NOT_FOUND"} 1',
          'shoal_requests_total{primitive="classify",model="other",code="OK"} 1',
          'shoal_requests_total{primitive="job",model="tiny-bert-mean",code="OK"} 1',
          'shoal_requests_total{primitive="job_read",model="tiny-bert-mean",code="OK"} 1',
          'shoal_requests_total{primitive="job_read",model="tiny-bert-mean",code="UNAVAILABLE"} 1',
          'shoal_requests_total{primitive="job_read",model="other",code="NOT_FOUND"} 1',
          'shoal_requests_total{primitive="job_read",model="other",code="OK"} 1',
        ].sort(),
      );
      expect(text).not.toContain('primitive="encode"');
      expect(text).not.toContain('nowhere');
      expect(text).not.toContain('never-submitted');
      expect(text).toContain('shoal_request_seconds_count{primitive="search",lane="interactive"} 2');
      expect(text).toContain('shoal_request_seconds_count{primitive="classify",lane="bulk"} 3');
      expect(text).toContain('shoal_request_seconds_count{primitive="job_read",lane="bulk"} 4');
    } finally {
      await local.close();
      rmSync(root, { recursive: true, force: true });
    }
  });

  it('adds CORS headers only for configured origins, and answers preflights without a token', async () => {
    const open = gateway({}, { corsOrigins: ['https://app.example'], apiTokens: ['cors-token-0123456789'] });
    try {
      const preflight = await open.inject({ method: 'OPTIONS', url: '/v1/encode', headers: { origin: 'https://app.example', 'access-control-request-method': 'POST' } });
      expect(preflight.statusCode).toBe(204);
      expect(preflight.headers['access-control-allow-origin']).toBe('https://app.example');
      expect(preflight.headers['access-control-allow-headers']).toBe('authorization, content-type');
      // Every method a route uses, DELETE /v1/indexes/:name/documents included.
      const removal = await open.inject({ method: 'OPTIONS', url: '/v1/indexes/docs/documents', headers: { origin: 'https://app.example', 'access-control-request-method': 'DELETE' } });
      expect(removal.statusCode).toBe(204);
      expect(String(removal.headers['access-control-allow-methods']).split(',').map((method) => method.trim())).toEqual(expect.arrayContaining(['GET', 'POST', 'DELETE']));
      const other = await open.inject({ method: 'GET', url: '/healthz', headers: { origin: 'https://evil.example' } });
      expect(other.headers['access-control-allow-origin']).toBeUndefined();
    } finally {
      await open.close();
    }
    const plain = await app.inject({ method: 'GET', url: '/healthz', headers: { origin: 'https://app.example' } });
    expect(plain.headers['access-control-allow-origin']).toBeUndefined();
  });
});

describe('jobs', () => {
  it('POST /v1/jobs queues a valid job (202, Location) and GET /v1/jobs/:id returns its status and result location', async () => {
    const submission = { primitive: 'encode', request: { model: 'tiny-bert-mean', items: ['a', 'b', 'c'] }, part_items: 2 };
    const response = await app.inject({ method: 'POST', url: '/v1/jobs', payload: submission });
    expect(response.statusCode).toBe(202);
    const submitted = z.looseObject({ job_id: z.string(), parts: z.number(), items: z.number() }).parse(response.json());
    expect(submitted).toMatchObject({ parts: 2, items: 3 });
    expect(response.headers.location).toBe(`/v1/jobs/${submitted.job_id}`);
    const status = await app.inject({ method: 'GET', url: `/v1/jobs/${submitted.job_id}` });
    expect(status.statusCode).toBe(200);
    expect(status.json()).toMatchObject({
      job_id: submitted.job_id,
      state: 'queued',
      parts: 2,
      items: 3,
      results: { kind: 'stream', stream: 'SHOAL_RESULTS', subject: `shoal.results.${submitted.job_id}.*`, vectors: 'f32' },
    });
    const stored = await app.inject({
      method: 'POST',
      url: '/v1/jobs',
      payload: { job_id: 'nightly-1', primitive: 'score', request: { model: 'tiny-cross-encoder', query: 'q', items: ['x'] }, result: { kind: 'store', uri: 'file:///data/out/' } },
    });
    expect(stored.json()).toMatchObject({ job_id: 'nightly-1', results: { kind: 'store', uri: 'file:///data/out/nightly-1/' } });
  });

  it('refuses a job whose inner request is invalid, naming the field, before queueing it', async () => {
    const before = jobs.submissions.length;
    const response = await app.inject({ method: 'POST', url: '/v1/jobs', payload: { primitive: 'score', request: { model: 'tiny-cross-encoder', items: ['x'] } } });
    expect(response.statusCode).toBe(422);
    expect(errorOf(response.body).message).toContain('query');
    expect(jobs.submissions.length).toBe(before);
  });

  it('answers 404 NOT_FOUND for an unknown job, 422 for a malformed id, 503 without a jobs backend', async () => {
    expect(errorOf((await app.inject({ method: 'GET', url: '/v1/jobs/never-submitted' })).body).code).toBe('NOT_FOUND');
    expect((await app.inject({ method: 'GET', url: '/v1/jobs/bad.id' })).statusCode).toBe(422);
    const nojobs = gateway({ jobs: null });
    try {
      const response = await nojobs.inject({ method: 'POST', url: '/v1/jobs', payload: { primitive: 'encode', request: { model: 'm', items: ['x'] } } });
      expect([response.statusCode, errorOf(response.body).code]).toEqual([503, 'UNAVAILABLE']);
    } finally {
      await nojobs.close();
    }
  });
});

describe('real clients against a listening gateway', () => {
  let base: string;
  let listening: FastifyInstance;
  beforeAll(async () => {
    listening = gateway();
    base = await listening.listen({ host: '127.0.0.1', port: 0 });
  });
  afterAll(async () => listening.close());

  it('openai embeddings.create (float and base64) returns the vectors of /v1/encode', async () => {
    const client = new OpenAI({ apiKey: 'unused', baseURL: `${base}/v1`, maxRetries: 0 });
    const float = await client.embeddings.create({ model: 'tiny-bert-mean', input: TEXTS, encoding_format: 'float' });
    expect(float.object).toBe('list');
    expect(float.model).toBe('tiny-bert-mean');
    expect(float.usage).toEqual({ prompt_tokens: 13, total_tokens: 13 });
    expect(float.data.map((d) => [d.object, d.index])).toEqual([['embedding', 0], ['embedding', 1]]);
    float.data.forEach((d, i) => expectAllClose(d.embedding, EXPECTED[i] ?? [], ATOL, `float ${i}`));
    // The client's default: it asks for base64 and decodes the float32 bytes itself.
    const decoded = await client.embeddings.create({ model: 'tiny-bert-mean', input: TEXTS });
    decoded.data.forEach((d, i) => expectAllClose(d.embedding, float.data[i]?.embedding ?? [], 1e-7, `base64 ${i}`));
    const single = await client.embeddings.create({ model: 'tiny-bert-mean', input: 'a dog', dimensions: 4, encoding_format: 'float' });
    const cut = l2Normalize((EXPECTED[0] ?? []).slice(0, 4));
    expectAllClose(single.data[0]?.embedding ?? [], cut, ATOL, 'dimensions 4');
  });

  it('openai client errors carry the status and code: token ids 422, unknown model 404', async () => {
    const client = new OpenAI({ apiKey: 'unused', baseURL: `${base}/v1`, maxRetries: 0 });
    const ids = await client.embeddings.create({ model: 'tiny-bert-mean', input: [[1, 2, 3]] }).catch((error: unknown) => error);
    expect(ids).toBeInstanceOf(OpenAI.APIError);
    expect(ids).toMatchObject({ status: 422, code: 'INVALID_INPUT', message: expect.stringContaining('token-id arrays are not supported') });
    const missing = await client.embeddings.create({ model: 'nobody/missing', input: 'x' }).catch((error: unknown) => error);
    expect(missing).toMatchObject({ status: 404, code: 'MODEL_NOT_FOUND' });
    const models = await client.models.list();
    expect(models.data.map((m) => m.id)).toEqual(['tiny-bert-mean', 'tiny-cross-encoder']);
  });

  it('TEI /embed with plain fetch returns number[][]; a too-long input is refused unless truncate is true', async () => {
    const post = (path: string, body: unknown) => fetch(`${base}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    const vectors = z.array(z.array(z.number())).parse(await (await post('/embed', { inputs: TEXTS })).json());
    vectors.forEach((v, i) => expectAllClose(v, EXPECTED[i] ?? [], ATOL, `tei ${i}`));
    const one = z.array(z.array(z.number())).parse(await (await post('/models/tiny-bert-mean/embed', { inputs: 'a dog' })).json());
    expectAllClose(one[0] ?? [], EXPECTED[0] ?? [], ATOL, 'prefixed route');
    const long = await post('/embed', { inputs: [LONG_TEXT] });
    expect(long.status).toBe(413);
    expect(errorOf(await long.text())).toMatchObject({ code: 'INPUT_TOO_LARGE', details: { index: 0 } });
    const truncated = await post('/embed', { inputs: [LONG_TEXT], truncate: true });
    expect(truncated.status).toBe(200);
  });

  it('TEI /rerank with plain fetch returns [{index, score, text}] best first', async () => {
    const response = await fetch(`${base}/rerank`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ query: QUERY, texts: PASSAGES, return_text: true }),
    });
    expect(response.status).toBe(200);
    const ranked = z.array(z.strictObject({ index: z.number(), score: z.number(), text: z.string() })).parse(await response.json());
    const expected = PASSAGES.map((p) => rerankScore(QUERY, p));
    expect(ranked.map((r) => r.index)).toEqual([0, 1, 2].sort((a, b) => (expected[b] ?? 0) - (expected[a] ?? 0)));
    for (const r of ranked) {
      expect(r.text).toBe(PASSAGES[r.index]);
      expect(Math.abs(r.score - (expected[r.index] ?? Number.NaN))).toBeLessThanOrEqual(ATOL);
    }
    const raw = await fetch(`${base}/rerank`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ query: QUERY, texts: PASSAGES, raw_scores: true }) });
    expect(errorOf(await raw.text()).code).toBe('UNSUPPORTED_OPERATION');
  });
});

describe('configuration', () => {
  it('takes flags over SHOAL_* variables over defaults, and tokens from the list and the file', () => {
    const dir = mkdtempSync(join(tmpdir(), 'shoal-gw-config-'));
    try {
      const file = join(dir, 'tokens');
      writeFileSync(file, '# ops team\nfile-token-0123456789abc\n\n');
      const config = resolveGatewayConfig(
        { port: '9000', apiTokensFile: file },
        { SHOAL_PORT: '7000', SHOAL_HOST: '127.0.0.1', SHOAL_API_TOKENS: 'env-token-0123456789abc', SHOAL_BODY_LIMIT: '1MiB', NATS_URL: 'nats://nats:4222' },
      );
      expect(config).toMatchObject({
        host: '127.0.0.1',
        port: 9000,
        apiTokens: ['env-token-0123456789abc', 'file-token-0123456789abc'],
        bodyLimitBytes: 1024 * 1024,
        requestTimeoutMs: 60_000,
        natsPrefix: 'shoal',
        corsOrigins: [],
        embedModel: null,
      });
      expect(config.nats.servers).toEqual(['nats://nats:4222']);
      expect(Object.isFrozen(config)).toBe(true);
      expect(resolveGatewayConfig({}, {})).toMatchObject({ host: '127.0.0.1', port: 8080, bodyLimitBytes: 8 * 1024 * 1024, apiTokens: [] });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('names the flag and variable of a bad value, and never echoes a token', () => {
    expect(() => resolveGatewayConfig({ port: 'eighty' }, {})).toThrow(/--port \(or SHOAL_PORT\): must be a whole number/);
    expect(() => resolveGatewayConfig({}, { SHOAL_BODY_LIMIT: '50%' })).toThrow(/--body-limit \(or SHOAL_BODY_LIMIT\)/);
    let message = '';
    try {
      resolveGatewayConfig({}, { SHOAL_API_TOKENS: 'short-secret' });
    } catch (error) {
      message = error instanceof Error ? error.message : '';
    }
    expect(message).toContain('tokens must be at least 16 characters');
    expect(message).not.toContain('short-secret');
  });
});
