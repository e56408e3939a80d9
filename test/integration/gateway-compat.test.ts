import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { InferenceEngine } from '../../pipelines/inference/engine.js';
import type { GatewayDeps, GatewaySettings } from '../../services/gateway/context.js';
import { expectAllClose } from '../helpers/conformance.js';
import { ErrorBody, localGateway } from '../helpers/gateway.js';
import { FIXTURES_DIR } from '../helpers/shared.js';
import { l2Normalize, loadTinyModel, meanPool, tokenOutputs } from '../helpers/tiny-model.js';
import { capturingLogger } from '../helpers/capturing-logger.js';

/**
 * The gateway as a client migrating from OpenAI's embeddings API or Hugging Face TEI sees it,
 * plus the edges a hostile client pokes at: TEI's `dimensions` without `normalize`, 405 on
 * parametric routes, the headers the `openai` client sends through a CORS preflight, and URLs
 * the router itself refuses, which must still answer in the gateway's error shape.
 */

const MODELS_DIR = join(FIXTURES_DIR, 'models');
const ATOL = 2e-5;
const bert = loadTinyModel('tiny-bert-mean');
/** Mean-pooled, not normalized: what TEI's /embed answers with `normalize: false`. */
const rawEmbedding = (tokens: string[]): number[] => meanPool(tokenOutputs(bert, { ids: bert.ids(tokens) }));
const A_DOG = rawEmbedding(['[CLS]', 'a', 'dog', '[SEP]']);

const Vectors = z.array(z.array(z.number()));

let engine: InferenceEngine;
let app: FastifyInstance;

function gateway(settings: Partial<GatewaySettings> = {}, overrides: Partial<GatewayDeps> = {}): FastifyInstance {
  return localGateway(engine, settings, overrides);
}

beforeAll(async () => {
  engine = new InferenceEngine({ sources: { modelDirs: [MODELS_DIR], allowDownload: false }, runtime: { intraOpThreads: 1 }, interactiveSessions: false });
  app = gateway();
  await app.ready();
});
afterAll(async () => {
  await app.close();
  await engine.close();
});

describe('OpenAI /v1/embeddings', () => {
  it('packs base64 as little-endian float32 of the float answer, accepting `user`, counting tokens', async () => {
    const body = { model: 'tiny-bert-mean', input: ['a dog', 'a dog'], user: 'end-user-42' };
    const float = await app.inject({ method: 'POST', url: '/v1/embeddings', payload: body });
    const packed = await app.inject({ method: 'POST', url: '/v1/embeddings', payload: { ...body, encoding_format: 'base64' } });
    expect([float.statusCode, packed.statusCode]).toEqual([200, 200]);
    const floats = z.object({ data: z.array(z.object({ embedding: z.array(z.number()) })), usage: z.unknown() }).parse(float.json());
    const strings = z.object({ data: z.array(z.object({ index: z.number(), embedding: z.string() })), usage: z.unknown() }).parse(packed.json());
    expect(strings.usage).toEqual({ prompt_tokens: 8, total_tokens: 8 });
    const bytes = Buffer.from(strings.data[1]?.embedding ?? '', 'base64');
    expect(bytes.length).toBe(4 * A_DOG.length);
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    const decoded = Array.from({ length: bytes.length / 4 }, (_, i) => view.getFloat32(4 * i, true));
    expect(decoded).toEqual(Array.from(Float32Array.from(floats.data[1]?.embedding ?? [])));
    expectAllClose(decoded, l2Normalize(A_DOG), ATOL, 'base64 a dog');
  });
});

describe('TEI /embed dimensions', () => {
  it('keeps the first N raw values with normalize false, as TEI does (it used to renormalize them)', async () => {
    const response = await app.inject({ method: 'POST', url: '/embed', payload: { inputs: 'a dog', normalize: false, dimensions: 3 } });
    expect(response.statusCode).toBe(200);
    const [vector] = Vectors.parse(response.json());
    expectAllClose(vector ?? [], A_DOG.slice(0, 3), ATOL, 'raw cut');
    // Not unit length (1.12 here): the renormalized cut it used to answer was.
    expect(Math.abs(Math.hypot(...(vector ?? [])) - 1)).toBeGreaterThan(0.1);
  });

  it('normalizes the cut vector with normalize true (the default), as TEI does', async () => {
    const response = await app.inject({ method: 'POST', url: '/embed', payload: { inputs: 'a dog', dimensions: 3 } });
    expect(response.statusCode).toBe(200);
    expectAllClose(Vectors.parse(response.json())[0] ?? [], l2Normalize(A_DOG.slice(0, 3)), ATOL, 'normalized cut');
  });
});

describe('TEI optional fields', () => {
  it('takes null for the fields TEI declares optional (truncate, prompt_name, dimensions), as TEI does', async () => {
    const embed = await app.inject({ method: 'POST', url: '/embed', payload: { inputs: ['a dog'], truncate: null, prompt_name: null, dimensions: null } });
    expect(embed.statusCode).toBe(200);
    expectAllClose(Vectors.parse(embed.json())[0] ?? [], l2Normalize(A_DOG), ATOL, 'nulls = defaults');
    const rerank = await app.inject({ method: 'POST', url: '/rerank', payload: { query: 'a dog', texts: ['a cat', 'a dog'], truncate: null } });
    expect(rerank.statusCode).toBe(200);
    expect(z.array(z.strictObject({ index: z.number(), score: z.number() })).parse(rerank.json())).toHaveLength(2);
    // Fields TEI does not declare optional stay refused when null.
    const normalize = await app.inject({ method: 'POST', url: '/embed', payload: { inputs: 'a dog', normalize: null } });
    expect([normalize.statusCode, ErrorBody.parse(normalize.json()).error.code]).toEqual([422, 'INVALID_INPUT']);
  });
});

describe('405 on parametric routes', () => {
  it('answers a known parametric route called with another method 405 with Allow, not 404 "no route"', async () => {
    const cases: Array<[method: 'GET' | 'POST' | 'DELETE', url: string, allow: string]> = [
      ['DELETE', '/v1/jobs/job-1', 'GET'],
      ['POST', '/v1/jobs/job-1/results', 'GET'],
      ['GET', '/models/tiny-bert-mean/embed', 'POST'],
      ['GET', '/models/BAAI/bge-small-en-v1.5/rerank', 'POST'],
    ];
    for (const [method, url, allow] of cases) {
      const response = await app.inject({ method, url });
      expect([response.statusCode, response.headers.allow], `${method} ${url}`).toEqual([405, allow]);
      expect(ErrorBody.parse(response.json()).error).toMatchObject({ code: 'METHOD_NOT_ALLOWED', message: `${method} ${url}: use ${allow}` });
    }
    // Paths no route matches stay 404, whatever the method.
    for (const url of ['/v1/jobs/job-1/results/more', '/models/a/b/c/embed', '/models/x/embedding']) {
      const response = await app.inject({ method: 'GET', url });
      expect([response.statusCode, ErrorBody.parse(response.json()).error.code], url).toEqual([404, 'NOT_FOUND']);
    }
  });
});

describe('CORS preflight of the openai client', () => {
  it('allows the headers a browser asks for, so the openai SDK (X-Stainless-*) passes its preflight', async () => {
    const cors = gateway({ corsOrigins: ['https://app.example'] });
    try {
      const asked = 'authorization, content-type, x-stainless-lang, x-stainless-package-version, x-stainless-os, x-stainless-arch, x-stainless-runtime, x-stainless-runtime-version, x-stainless-retry-count, x-stainless-timeout';
      const preflight = await cors.inject({
        method: 'OPTIONS',
        url: '/v1/embeddings',
        headers: { origin: 'https://app.example', 'access-control-request-method': 'POST', 'access-control-request-headers': asked },
      });
      expect(preflight.statusCode).toBe(204);
      const allowed = String(preflight.headers['access-control-allow-headers']).split(',').map((name) => name.trim().toLowerCase());
      for (const name of asked.split(', ')) expect(allowed, name).toContain(name);
      // A preflight asking for nothing in particular still gets the two headers every call needs.
      const plain = await cors.inject({ method: 'OPTIONS', url: '/v1/embeddings', headers: { origin: 'https://app.example', 'access-control-request-method': 'POST' } });
      expect(plain.headers['access-control-allow-headers']).toBe('authorization, content-type');
      // A header list that is not a list of header names is not echoed.
      const odd = await cors.inject({
        method: 'OPTIONS',
        url: '/v1/embeddings',
        headers: { origin: 'https://app.example', 'access-control-request-method': 'POST', 'access-control-request-headers': 'content-type, bad header\u00e9' },
      });
      expect(odd.headers['access-control-allow-headers']).toBe('authorization, content-type');
    } finally {
      await cors.close();
    }
  });
});

describe('URLs the router refuses', () => {
  it('answers a malformed percent-encoding and an over-long path segment in the error shape of every other refusal', async () => {
    for (const url of ['/v1/jobs/%ZZ', '/models/%ED%A0%80/embed', '/models/%/embed']) {
      const response = await app.inject({ method: 'POST', url, payload: { inputs: 'a' } });
      expect(response.statusCode, url).toBe(422);
      expect(response.headers['content-type'], url).toBe('application/json; charset=utf-8');
      expect(ErrorBody.parse(response.json()).error, url).toMatchObject({ code: 'INVALID_INPUT', message: expect.stringContaining('the URL path is not valid') });
    }
    const long = await app.inject({ method: 'POST', url: `/models/${'a'.repeat(150)}/embed`, payload: { inputs: 'a' } });
    expect(long.statusCode).toBe(422);
    expect(ErrorBody.parse(long.json()).error).toMatchObject({ code: 'INVALID_INPUT', message: expect.stringContaining('path segment') });
    expect(long.body.length).toBeLessThan(400);
  });

  it('names a prototype-polluting key as a possible cause, not only invalid JSON', async () => {
    for (const payload of ['{"input":"a","__proto__":{"x":1}}', '{"input":"a","constructor":{"prototype":{"x":1}}}']) {
      const response = await app.inject({ method: 'POST', url: '/v1/embeddings', headers: { 'content-type': 'application/json' }, payload });
      expect(response.statusCode, payload).toBe(422);
      expect(ErrorBody.parse(response.json()).error.message, payload).toMatch(/"__proto__" or "constructor": \{"prototype"\} key/);
    }
  });
});

describe('request ids', () => {
  const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

  it('answers every request with X-Request-Id: a fresh one, or the caller\'s own when well formed, also on refusals', async () => {
    const payload = { model: 'tiny-bert-mean', input: 'a dog' };
    const first = await app.inject({ method: 'POST', url: '/v1/embeddings', payload });
    const second = await app.inject({ method: 'POST', url: '/v1/embeddings', payload });
    expect(first.statusCode).toBe(200);
    expect(String(first.headers['x-request-id'])).toMatch(UUID);
    expect(second.headers['x-request-id']).not.toBe(first.headers['x-request-id']);

    const mine = 'trace-0f3a_17:retry.2';
    const requests = [
      { method: 'POST', url: '/v1/embeddings', payload },
      { method: 'POST', url: '/v1/embeddings', payload: { model: 'tiny-bert-mean', input: [] } },
      { method: 'GET', url: '/no-such-route' },
      { method: 'GET', url: '/v1/embeddings' },
      { method: 'POST', url: '/v1/jobs/%ZZ', payload },
    ] as const;
    for (const request of requests) {
      const response = await app.inject({ ...request, headers: { 'x-request-id': mine } });
      expect(response.headers['x-request-id'], `${request.method} ${request.url}`).toBe(mine);
    }
    // Not an id: spaces, a line break, too long. A fresh one is made instead.
    for (const bad of ['two words', 'x\u00e9', 'a'.repeat(201)]) {
      const response = await app.inject({ method: 'GET', url: '/healthz', headers: { 'x-request-id': bad } });
      expect(String(response.headers['x-request-id']), bad).toMatch(UUID);
    }
  });

  it('sends it with a 401 and names it in the log line of a refused request', async () => {
    const logs = capturingLogger();
    const secured = gateway({ apiTokens: ['request-id-token-0123456789'], corsOrigins: ['https://app.example'] }, { logger: logs.logger });
    try {
      const refused = await secured.inject({ method: 'POST', url: '/v1/tokenize', headers: { 'x-request-id': 'r-401', origin: 'https://app.example' }, payload: { model: 'tiny-bert-mean', items: ['a'] } });
      expect([refused.statusCode, refused.headers['x-request-id']]).toEqual([401, 'r-401']);
      // Browsers let a page read it only when exposed.
      expect(String(refused.headers['access-control-expose-headers'])).toContain('x-request-id');
      const invalid = await secured.inject({
        method: 'POST',
        url: '/v1/tokenize',
        headers: { 'x-request-id': 'r-422', authorization: 'Bearer request-id-token-0123456789' },
        payload: { model: 'tiny-bert-mean', items: [] },
      });
      expect([invalid.statusCode, invalid.headers['x-request-id']]).toEqual([422, 'r-422']);
      const lines = logs.lines();
      expect(lines.find((line) => line.msg === 'authentication failed')).toMatchObject({ request_id: 'r-401', reason: 'missing' });
      const refusals = lines.filter((line) => line.msg === 'request refused').map((line) => [line.request_id, line.code, line.status]);
      expect(refusals).toEqual([
        ['r-401', 'UNAUTHORIZED', 401],
        ['r-422', 'INVALID_INPUT', 422],
      ]);
    } finally {
      await secured.close();
    }
  });
});
