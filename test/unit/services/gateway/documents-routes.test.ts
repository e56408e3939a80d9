import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ShoalMetrics } from '../../../../adapters/observability/metrics.js';
import type { Engine } from '../../../../adapters/protocol/engine.js';
import { ErrorCode, ShoalError } from '../../../../adapters/protocol/errors.js';
import type { IngestRunStatus } from '../../../../adapters/protocol/ingest.js';
import { checkRemoteModelName } from '../../../../adapters/protocol/model-names.js';
import type { EncodeRequest, ScoreRequest } from '../../../../adapters/protocol/requests.js';
import type { EncodeResult } from '../../../../adapters/protocol/results.js';
import { LanceDbStore } from '../../../../adapters/stores/lancedb/store.js';
import { buildGatewayApp } from '../../../../services/gateway/app.js';
import type { IngestApi, IngestStart } from '../../../../services/gateway/context.js';
import { MemoryJobs, ScriptedEngine, TEST_SETTINGS } from '../../../helpers/gateway.js';

/**
 * POST /v1/search names its `filter` and `mode` fields in their messages (not the CLI's `--filter`
 * and `--mode`), also for the checks that need the index (a column it was made without, a mode
 * it has no vectors for).
 * POST /v1/ingest refuses what the caller got wrong before a run starts: a model name that is a
 * path is 422 as on every other route (not a 202 whose run then fails), and a pipeline definition
 * object that does not validate is 422 INVALID_INPUT (the caller's mistake), not a 500.
 */

class RefusingIngest implements IngestApi {
  readonly started: IngestStart[] = [];

  async start(request: IngestStart): Promise<IngestRunStatus> {
    this.started.push(request);
    throw new Error('a refused request must not start a run');
  }

  async status(): Promise<IngestRunStatus | null> {
    return null;
  }
}

describe('POST /v1/ingest: refused at submit', () => {
  const ingest = new RefusingIngest();
  let app: FastifyInstance;

  beforeAll(async () => {
    app = buildGatewayApp(
      { engine: ScriptedEngine.failing(ErrorCode.INTERNAL), jobs: new MemoryJobs(), ingest, models: async () => [], metrics: new ShoalMetrics({ processMetrics: false }), ready: async () => ({ ready: true }) },
      { ...TEST_SETTINGS, indexes: { docs: '/tmp/shoal-never-written' } },
    );
    await app.ready();
  });
  afterAll(async () => {
    await app?.close();
  });

  const post = (payload: Record<string, unknown>) => app.inject({ method: 'POST', url: '/v1/ingest', payload: { index: 'docs', sources: [{ id: 'n1', text: 'The pilot boat leaves at dawn.' }], ...payload } });

  it('a model that is a path is 422 INVALID_INPUT, in the model field and in every model of a definition', async () => {
    const stages = (extra: Record<string, unknown>) => ({ pipeline: { name: 'p', stages: extra } });
    for (const payload of [
      { model: '../../etc' },
      { model: '/etc/passwd' },
      stages({ encode: { model: 'tiny-bert-mean', sparse: { model: '../x' } } }),
      stages({ encode: { model: 'tiny-bert-mean', multivector: { model: '~/colbert' } } }),
      stages({ parse: { ocrModel: '../../ocr' } }),
      stages({ extract: { model: 'a/../../b' } }),
      stages({ classify: { labels: ['a'], model: '/abs' } }),
    ]) {
      const response = await post(payload);
      expect(response.statusCode, JSON.stringify(payload)).toBe(422);
      expect(response.json()).toMatchObject({ error: { code: 'INVALID_INPUT', details: { field: 'model' } } });
    }
    expect(ingest.started).toHaveLength(0);
  });

  it('a definition object that does not validate is 422 INVALID_INPUT naming the key, not 500 CONFIG_INVALID', async () => {
    const response = await post({ pipeline: { name: 'x', stages: { chunk: { size: 1 } } } });
    expect(response.statusCode, response.body).toBe(422);
    expect(response.json()).toMatchObject({ error: { code: 'INVALID_INPUT', message: expect.stringContaining('stages.chunk.size'), details: { field: 'pipeline' } } });
    expect(ingest.started).toHaveLength(0);
  });
});

describe('POST /v1/search: a bad filter is named as the request field', () => {
  let app: FastifyInstance;
  beforeAll(async () => {
    app = buildGatewayApp(
      { engine: ScriptedEngine.failing(ErrorCode.INTERNAL), jobs: new MemoryJobs(), models: async () => [], metrics: new ShoalMetrics({ processMetrics: false }), ready: async () => ({ ready: true }) },
      { ...TEST_SETTINGS, indexes: { docs: '/tmp/shoal-never-written' } },
    );
    await app.ready();
  });
  afterAll(async () => {
    await app?.close();
  });

  it('answers 422 with "filter: ..." and details.field, before the index is opened', async () => {
    for (const filter of ['page ==', 'nosuch = 1', "source = 'a'; DROP TABLE chunks"]) {
      const response = await app.inject({ method: 'POST', url: '/v1/search', payload: { index: 'docs', query: 'pilot boat', filter } });
      expect(response.statusCode, filter).toBe(422);
      const body = response.json<{ error: { code: string; message: string; details?: { field?: string } } }>();
      expect(body.error.code).toBe('INVALID_INPUT');
      expect(body.error.message, filter).toMatch(/^filter: /);
      expect(body.error.details?.field).toBe('filter');
    }
  });
});

/** An encoder that answers every text with the same 4-dimensional vector; like the gateway's NATS engine, it refuses model names that are paths. */
class FixedEngine implements Engine {
  async encode(request: EncodeRequest): Promise<EncodeResult> {
    checkRemoteModelName(request.model);
    const items = Array.isArray(request.items) ? request.items : [];
    return { model: request.model, items: items.map((_, index) => ({ index, dense: [1, 0, 0, 0] })), usage: { items: items.length, tokens: items.length } };
  }

  score(request: ScoreRequest): never {
    checkRemoteModelName(request.model);
    throw new ShoalError(ErrorCode.UNSUPPORTED_OPERATION, 'not in this test');
  }

  extract(): never {
    throw new ShoalError(ErrorCode.UNSUPPORTED_OPERATION, 'not in this test');
  }

  tokenize(): never {
    throw new ShoalError(ErrorCode.UNSUPPORTED_OPERATION, 'not in this test');
  }

  async close(): Promise<void> {}
}

describe('POST /v1/search: the checks made against the index name the request fields', () => {
  let app: FastifyInstance;
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'shoal-search-fields-'));
    // A dense-only index without labels or entities columns: one row.
    const sink = new LanceDbStore({ dir });
    await sink.prepare({ dimension: 4, distance: 'cosine', optionalColumns: [], metadata: { model: 'tiny-bert-mean' } });
    await sink.commit(
      [{ id: 'r1', document_id: 'd1', source: 's1', page: 1, chunk: 0, text: 'the pilot boat', start: 0, end: 14, heading: null, settings: 's', vector: [1, 0, 0, 0], entities: null, labels: null, ingested_at: 'now' }],
      [{ source: 's1', document_id: 'd1', settings: 's', chunks: 1, pages: 1, ingested_at: 'now' }],
    );
    await sink.close();
    // The same row in an index built with a model folder (shoal ingest --model /models/local-bge).
    const folderSink = new LanceDbStore({ dir: join(dir, 'folder') });
    await folderSink.prepare({ dimension: 4, distance: 'cosine', optionalColumns: [], metadata: { model: '/models/local-bge' } });
    await folderSink.close();
    app = buildGatewayApp(
      { engine: new FixedEngine(), jobs: new MemoryJobs(), models: async () => [], metrics: new ShoalMetrics({ processMetrics: false }), ready: async () => ({ ready: true }) },
      { ...TEST_SETTINGS, indexes: { docs: dir, folder: join(dir, 'folder') } },
    );
    await app.ready();
  });
  afterAll(async () => {
    await app?.close();
    await rm(dir, { recursive: true, force: true });
  });

  const search = (payload: Record<string, unknown>) => app.inject({ method: 'POST', url: '/v1/search', payload: { index: 'docs', query: 'pilot boat', ...payload } });

  it('answers hits for a good request (the index and engine of this test work)', async () => {
    const response = await search({ filter: 'page = 1' });
    expect(response.statusCode, response.body).toBe(200);
    expect(response.json()).toMatchObject({ hits: [{ rank: 1, id: 'r1', text: 'the pilot boat' }] });
  });

  it.each([
    [{ filter: "labels LIKE '%invoice%'" }, 'filter', /^filter: this index has no labels column/],
    [{ filter: 'entities IS NULL' }, 'filter', /^filter: this index has no entities column/],
    [{ mode: 'sparse' }, 'mode', /^mode sparse needs sparse vectors/],
  ])('%j: 422 INVALID_INPUT naming the field, not the CLI flag', async (payload, field, message) => {
    const response = await search(payload);
    expect(response.statusCode, response.body).toBe(422);
    const body = response.json<{ error: { code: string; message: string; details?: { field?: string } } }>();
    expect(body.error.code).toBe('INVALID_INPUT');
    expect(body.error.message).toMatch(message);
    expect(body.error.message).not.toContain('--');
    expect(body.error.details?.field).toBe(field);
  });

  it('explains an index built with a model folder (the workers load models by name), and names rerank when that is the path', async () => {
    const folder = await app.inject({ method: 'POST', url: '/v1/search', payload: { index: 'folder', query: 'pilot boat' } });
    expect(folder.statusCode, folder.body).toBe(500);
    const error = folder.json<{ error: { code: string; message: string; details?: Record<string, unknown> } }>().error;
    expect(error.code).toBe('CONFIG_INVALID');
    expect(error.message).toMatch(/^index folder records the model it was built with as a local folder or URL, which the workers do not load \(model "\/models\/local-bge" is a path/);
    expect(error.details).toMatchObject({ index: 'folder' });

    const rerank = await search({ rerank: '/models/cross' });
    expect(rerank.statusCode, rerank.body).toBe(422);
    const refused = rerank.json<{ error: { code: string; message: string; details?: { field?: string } } }>().error;
    expect(refused).toMatchObject({ code: 'INVALID_INPUT', details: { field: 'rerank' } });
    expect(refused.message).toMatch(/^rerank: model "\/models\/cross" is a path/);
  });
});
