import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { compileErrors, validate } from '@readme/openapi-parser';
import { Ajv2020 } from 'ajv/dist/2020.js';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ShoalMetrics } from '../../adapters/observability/metrics.js';
import { LanceDbStore } from '../../adapters/stores/lancedb/store.js';
import { InferenceEngine } from '../../pipelines/inference/engine.js';
import { buildGatewayApp, registeredRoutes } from '../../services/gateway/app.js';
import { openApiPath } from '../../services/gateway/openapi/document.js';
import { ROUTE_TABLE } from '../../services/gateway/openapi/route-table.js';
import { MemoryJobs, TEST_SETTINGS } from '../helpers/gateway.js';
import { MemoryIngest } from '../helpers/memory-ingest.js';
import { FIXTURES_DIR } from '../helpers/shared.js';

/**
 * GET /openapi.json is a valid OpenAPI 3.1 document (checked by @readme/openapi-parser), names
 * every route fastify registered, and describes what the routes really answer: one real call per
 * route (the in-process engine over the fixture models, an index with one row, in-memory jobs
 * and ingest runs) is checked with ajv against the schema the document gives for its status.
 * GET /docs serves Swagger UI from the package, offline, and both stay open when tokens are set.
 */

const MODELS_DIR = join(FIXTURES_DIR, 'models');
const TOKEN = 'openapi-test-token-0123456789';

const Operation = z.looseObject({ responses: z.record(z.string(), z.looseObject({ content: z.record(z.string(), z.looseObject({ schema: z.record(z.string(), z.unknown()).optional() })).optional() })) });
const Document = z.looseObject({ openapi: z.string(), paths: z.record(z.string(), z.record(z.string(), z.unknown())), components: z.looseObject({ schemas: z.record(z.string(), z.unknown()) }) });
type Document = z.infer<typeof Document>;

interface Call {
  /** The fastify route the call reaches. */
  route: string;
  method: 'GET' | 'POST' | 'DELETE';
  url: string;
  payload?: Record<string, unknown>;
  /** The status this call must get: success, or a documented refusal. */
  status: number;
}

let engine: InferenceEngine;
let app: FastifyInstance;
let dir: string;
let document: Document;

beforeAll(async () => {
  engine = new InferenceEngine({ sources: { modelDirs: [MODELS_DIR], allowDownload: false }, runtime: { intraOpThreads: 1 }, interactiveSessions: false });
  // An index with one row, its vector from the model the search encodes with.
  dir = await mkdtemp(join(tmpdir(), 'shoal-openapi-'));
  const text = 'the pilot boat leaves at dawn';
  const encoded = await engine.encode({ model: 'tiny-bert-mean', items: [{ text }] });
  const vector = encoded.items[0]?.dense ?? [];
  const sink = new LanceDbStore({ dir });
  await sink.prepare({ dimension: vector.length, distance: 'cosine', optionalColumns: [], metadata: { model: 'tiny-bert-mean' } });
  await sink.commit(
    [{ id: 'r1', document_id: 'd1', source: 's1', page: 1, chunk: 0, text, start: 0, end: text.length, heading: null, settings: 's', vector, entities: null, labels: null, ingested_at: 'now' }],
    [{ source: 's1', document_id: 'd1', settings: 's', chunks: 1, pages: 1, ingested_at: 'now' }],
  );
  await sink.close();
  app = buildGatewayApp(
    {
      engine,
      jobs: new MemoryJobs(),
      ingest: new MemoryIngest(),
      models: async () => [{ id: 'tiny-bert-mean', family: 'dense', primitives: ['encode'] }],
      metrics: new ShoalMetrics({ processMetrics: false }),
      ready: async () => ({ ready: true }),
    },
    { ...TEST_SETTINGS, sparseModel: 'tiny-splade', indexes: { docs: dir } },
  );
  await app.ready();
  const response = await app.inject({ method: 'GET', url: '/openapi.json' });
  expect(response.statusCode).toBe(200);
  document = Document.parse(response.json());
}, 60_000);

afterAll(async () => {
  await app?.close();
  await engine?.close();
  await rm(dir, { recursive: true, force: true });
});

/** One call per route: a success where the fixtures allow one, else a refusal the document lists. */
const CALLS: readonly Call[] = [
  { route: '/healthz', method: 'GET', url: '/healthz', status: 200 },
  { route: '/readyz', method: 'GET', url: '/readyz', status: 200 },
  { route: '/metrics', method: 'GET', url: '/metrics', status: 200 },
  { route: '/v1/encode', method: 'POST', url: '/v1/encode', payload: { model: 'tiny-bert-mean', items: [{ text: 'hello' }] }, status: 200 },
  { route: '/v1/encode', method: 'POST', url: '/v1/encode', payload: { model: 'tiny-bert-mean', items: [{ text: 'hello' }], encoding_format: 'base64' }, status: 200 },
  { route: '/v1/encode', method: 'POST', url: '/v1/encode', payload: { model: 'no-such-model', items: [{ text: 'hello' }] }, status: 404 },
  { route: '/v1/score', method: 'POST', url: '/v1/score', payload: { model: 'tiny-cross-encoder', query: 'boat', items: [{ text: 'a pilot boat' }, { text: 'a cake' }] }, status: 200 },
  { route: '/v1/extract', method: 'POST', url: '/v1/extract', payload: { model: 'tiny-ner', items: [{ text: 'John lives in Paris' }] }, status: 200 },
  { route: '/v1/tokenize', method: 'POST', url: '/v1/tokenize', payload: { model: 'tiny-bert-mean', items: [{ text: 'hello world' }] }, status: 200 },
  { route: '/v1/jobs', method: 'POST', url: '/v1/jobs', payload: { job_id: 'oa-job', primitive: 'encode', request: { model: 'tiny-bert-mean', items: [{ text: 'a' }] } }, status: 202 },
  { route: '/v1/jobs/:id', method: 'GET', url: '/v1/jobs/oa-job', status: 200 },
  { route: '/v1/jobs', method: 'GET', url: '/v1/jobs?limit=5', status: 200 },
  { route: '/v1/jobs', method: 'GET', url: '/v1/jobs?limit=0', status: 422 },
  { route: '/v1/jobs/:id', method: 'GET', url: '/v1/jobs/no-such-job', status: 404 },
  { route: '/v1/jobs/:id/results', method: 'GET', url: '/v1/jobs/oa-job/results', status: 503 },
  { route: '/v1/models', method: 'GET', url: '/v1/models', status: 200 },
  { route: '/v1/models/*', method: 'GET', url: '/v1/models/tiny-bert-mean', status: 200 },
  { route: '/v1/models/*', method: 'GET', url: '/v1/models/nobody%2Fnothing', status: 404 },
  { route: '/v1/models/*', method: 'GET', url: '/v1/models/..%2F..%2Fetc', status: 422 },
  { route: '/v1/embeddings', method: 'POST', url: '/v1/embeddings', payload: { model: 'tiny-bert-mean', input: ['hello', 'world'] }, status: 200 },
  { route: '/embed', method: 'POST', url: '/embed', payload: { inputs: 'hello' }, status: 200 },
  { route: '/models/:name/embed', method: 'POST', url: '/models/tiny-bert-mean/embed', payload: { inputs: ['hello'] }, status: 200 },
  { route: '/models/:org/:name/embed', method: 'POST', url: '/models/nobody/nothing/embed', payload: { inputs: ['hello'] }, status: 404 },
  { route: '/rerank', method: 'POST', url: '/rerank', payload: { query: 'boat', texts: ['a boat', 'a cake'], return_text: true }, status: 200 },
  { route: '/models/:name/rerank', method: 'POST', url: '/models/tiny-cross-encoder/rerank', payload: { query: 'boat', texts: ['a boat'] }, status: 200 },
  { route: '/models/:org/:name/rerank', method: 'POST', url: '/models/nobody/nothing/rerank', payload: { query: 'boat', texts: ['a boat'] }, status: 404 },
  { route: '/embed_sparse', method: 'POST', url: '/embed_sparse', payload: { inputs: 'pilot boat' }, status: 200 },
  { route: '/models/:name/embed_sparse', method: 'POST', url: '/models/tiny-splade/embed_sparse', payload: { inputs: ['pilot boat'] }, status: 200 },
  { route: '/models/:org/:name/embed_sparse', method: 'POST', url: '/models/nobody/nothing/embed_sparse', payload: { inputs: ['x'] }, status: 404 },
  { route: '/tokenize', method: 'POST', url: '/tokenize', payload: { inputs: 'hello world' }, status: 200 },
  { route: '/models/:name/tokenize', method: 'POST', url: '/models/tiny-bert-mean/tokenize', payload: { inputs: ['hello'] }, status: 200 },
  { route: '/models/:org/:name/tokenize', method: 'POST', url: '/models/nobody/nothing/tokenize', payload: { inputs: ['x'] }, status: 404 },
  { route: '/info', method: 'GET', url: '/info', status: 200 },
  { route: '/models/:name/info', method: 'GET', url: '/models/tiny-cross-encoder/info', status: 200 },
  { route: '/models/:org/:name/info', method: 'GET', url: '/models/nobody/nothing/info', status: 404 },
  { route: '/v1/search', method: 'POST', url: '/v1/search', payload: { index: 'docs', query: 'pilot boat', k: 3 }, status: 200 },
  { route: '/v1/search', method: 'POST', url: '/v1/search', payload: { index: 'nope', query: 'pilot boat' }, status: 404 },
  { route: '/v1/ingest', method: 'POST', url: '/v1/ingest', payload: { index: 'docs', sources: [{ id: 'n1', text: 'The pilot boat leaves at dawn.' }] }, status: 202 },
  { route: '/v1/ingest', method: 'POST', url: '/v1/ingest?wait=true', payload: { index: 'docs', sources: [{ id: 'n2', text: 'The harbour opens at six.' }] }, status: 200 },
  { route: '/v1/ingest', method: 'POST', url: '/v1/ingest', payload: { index: 'docs', sources: [] }, status: 422 },
  { route: '/v1/classify', method: 'POST', url: '/v1/classify', payload: { model: 'tiny-bert-mean', items: ['red running shoe'], labels: ['shoes', 'hats'] }, status: 200 },
  { route: '/v1/classify', method: 'POST', url: '/v1/classify', payload: { model: 'tiny-bert-mean', items: ['red running shoe'], labels: ['shoes', 'hats'], mode: 'job', job_id: 'oa-classify' }, status: 202 },
  { route: '/v1/indexes', method: 'GET', url: '/v1/indexes', status: 200 },
  { route: '/v1/indexes/:name/stats', method: 'GET', url: '/v1/indexes/docs/stats', status: 200 },
  { route: '/v1/indexes/:name/stats', method: 'GET', url: '/v1/indexes/nope/stats', status: 404 },
  { route: '/v1/indexes/:name/documents', method: 'GET', url: '/v1/indexes/docs/documents?limit=10&source_prefix=s', status: 200 },
  { route: '/v1/indexes/:name/documents', method: 'GET', url: '/v1/indexes/docs/documents?limit=0', status: 422 },
  { route: '/v1/indexes/:name/tables', method: 'GET', url: '/v1/indexes/docs/tables', status: 200 },
  { route: '/v1/indexes/:name/documents', method: 'DELETE', url: '/v1/indexes/docs/documents?source=s1', status: 200 },
  { route: '/v1/indexes/:name/documents', method: 'DELETE', url: '/v1/indexes/docs/documents?source=s1', status: 404 },
  { route: '/openapi.json', method: 'GET', url: '/openapi.json', status: 200 },
  { route: '/docs', method: 'GET', url: '/docs', status: 200 },
  { route: '/docs/:asset', method: 'GET', url: '/docs/swagger-ui-bundle.js', status: 200 },
  { route: '/docs/:asset', method: 'GET', url: '/docs/package.json', status: 404 },
  { route: '/ui', method: 'GET', url: '/ui', status: 200 },
  { route: '/ui/:asset', method: 'GET', url: '/ui/main.js', status: 200 },
  { route: '/ui/:asset', method: 'GET', url: '/ui/console.css', status: 200 },
  { route: '/ui/:asset', method: 'GET', url: '/ui/package.json', status: 404 },
];

/** The schema the document gives for `status` of the operation, with the document's components in reach of its $refs. */
function responseSchema(route: string, method: string, status: number): { contentTypes: string[]; schema: Record<string, unknown> | undefined } {
  const operation = Operation.parse(document.paths[openApiPath(route)]?.[method.toLowerCase()]);
  const answer = operation.responses[String(status)];
  if (answer === undefined) throw new Error(`${method} ${route}: status ${status} is not in the document`);
  const content = answer.content ?? {};
  const schema = content['application/json']?.schema;
  return { contentTypes: Object.keys(content), schema: schema === undefined ? undefined : { ...schema, components: document.components } };
}

describe('GET /openapi.json', () => {
  it('is a valid OpenAPI 3.1 document', async () => {
    expect(document.openapi).toBe('3.1.0');
    const result = await validate(structuredClone(document) as Parameters<typeof validate>[0]);
    expect(result.valid, result.valid ? '' : compileErrors(result)).toBe(true);
    // The upload form of POST /v1/ingest: its files and the text fields of the JSON body.
    const ingest = z
      .looseObject({ requestBody: z.looseObject({ content: z.record(z.string(), z.looseObject({ schema: z.looseObject({ properties: z.record(z.string(), z.unknown()), required: z.array(z.string()) }) })) }) })
      .parse(document.paths['/v1/ingest']?.post);
    const upload = ingest.requestBody.content['multipart/form-data']?.schema;
    expect(Object.keys(upload?.properties ?? {}).sort()).toEqual(['file', 'force', 'index', 'job_id', 'model', 'pipeline', 'prune', 'sources']);
    expect(upload?.required.sort()).toEqual(['file', 'index']);
    // A model without the primitive a job or a run needs (a NER model asked to encode) is 400
    // UNSUPPORTED_OPERATION from the real jobs and ingest gates, which this test's in-memory ones
    // do not have: the document lists it.
    for (const path of ['/v1/jobs', '/v1/ingest']) expect(Object.keys(Operation.parse(document.paths[path]?.post).responses), path).toContain('400');
  });

  it('documents every route fastify registered, and no route that does not exist', () => {
    const registered = registeredRoutes(app)
      .filter((route) => route.method !== 'HEAD' && route.method !== 'OPTIONS')
      .map((route) => `${route.method} ${route.url}`);
    const documented = ROUTE_TABLE.map((route) => `${route.method} ${route.path}`);
    expect(registered.length).toBeGreaterThan(30);
    expect([...registered].sort()).toEqual([...documented].sort());
    for (const route of ROUTE_TABLE) expect(document.paths[openApiPath(route.path)]?.[route.method.toLowerCase()], route.path).toBeDefined();
  });

  it('every route answers real calls as its response schema says', async () => {
    const ajv = new Ajv2020({ strict: false, validateFormats: false, allErrors: true });
    const called = new Set<string>();
    for (const call of CALLS) {
      const response = await app.inject({ method: call.method, url: call.url, ...(call.payload === undefined ? {} : { payload: call.payload }) });
      const what = `${call.method} ${call.url} ${JSON.stringify(call.payload ?? {}).slice(0, 120)}`;
      expect(response.statusCode, `${what}: ${response.body.slice(0, 300)}`).toBe(call.status);
      const { contentTypes, schema } = responseSchema(call.route, call.method, call.status);
      const type = (response.headers['content-type'] ?? '').toString().split(';', 1)[0] ?? '';
      expect(contentTypes, what).toContain(contentTypes.includes('application/octet-stream') ? 'application/octet-stream' : type);
      if (schema !== undefined) {
        const check = ajv.compile(schema);
        const valid = check(response.json());
        expect(valid, `${what}: ${JSON.stringify(check.errors?.slice(0, 3))} in ${response.body.slice(0, 300)}`).toBe(true);
      }
      called.add(`${call.method} ${call.route}`);
    }
    // A route added to the table without a call here fails: every answer shape is exercised.
    expect(ROUTE_TABLE.map((route) => `${route.method} ${route.path}`).filter((route) => !called.has(route))).toEqual([]);
  }, 60_000);
});

describe('GET /docs', () => {
  it('serves the Swagger UI page and its files from the package, pointed at /openapi.json', async () => {
    const page = await app.inject({ method: 'GET', url: '/docs' });
    expect(page.statusCode).toBe(200);
    expect(page.body).toContain('/docs/swagger-ui-bundle.js');
    const init = await app.inject({ method: 'GET', url: '/docs/docs-init.js' });
    expect(init.body).toContain("url: '/openapi.json'");
    const bundle = await app.inject({ method: 'GET', url: '/docs/swagger-ui-bundle.js' });
    expect(bundle.headers['content-type']).toContain('javascript');
    expect(bundle.body.length).toBeGreaterThan(100_000);
    const css = await app.inject({ method: 'GET', url: '/docs/swagger-ui.css' });
    expect(css.headers['content-type']).toContain('text/css');
    // Only the named files: nothing else of the package or the disk.
    for (const url of ['/docs/..%2Fpackage.json', '/docs/%2e%2e%2f%2e%2e%2fpackage.json', '/docs/index.html']) {
      expect((await app.inject({ method: 'GET', url })).statusCode, url).toBe(404);
    }
  });

  it('with tokens: /openapi.json and /docs stay open, the API needs the token, and the document says so', async () => {
    const secured = buildGatewayApp(
      { engine, jobs: new MemoryJobs(), models: async () => [], metrics: new ShoalMetrics({ processMetrics: false }), ready: async () => ({ ready: true }) },
      { ...TEST_SETTINGS, apiTokens: [TOKEN] },
    );
    try {
      await secured.ready();
      for (const url of ['/openapi.json', '/docs', '/docs/swagger-ui.css', '/docs/docs-init.js', '/ui', '/ui/console.css', '/ui/main.js']) {
        expect((await secured.inject({ method: 'GET', url })).statusCode, url).toBe(200);
      }
      expect((await secured.inject({ method: 'GET', url: '/v1/models' })).statusCode).toBe(401);
      const doc = Document.parse((await secured.inject({ method: 'GET', url: '/openapi.json' })).json());
      const models = z.looseObject({ security: z.array(z.record(z.string(), z.array(z.string()))), responses: z.record(z.string(), z.unknown()) }).parse(doc.paths['/v1/models']?.get);
      expect(models.security).toEqual([{ bearerAuth: [] }]);
      expect(models.responses['401']).toBeDefined();
      const health = z.looseObject({ security: z.array(z.unknown()) }).parse(doc.paths['/healthz']?.get);
      expect(health.security).toEqual([]);
      // Without tokens no operation asks for one.
      const open = z.looseObject({ security: z.array(z.unknown()) }).parse(document.paths['/v1/models']?.get);
      expect(open.security).toEqual([]);
    } finally {
      await secured.close();
    }
  });
});
