import { mkdtemp, rm } from 'node:fs/promises';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Engine } from '../../adapters/protocol/engine.js';
import { WIRE_VERSION, type JobPartResult } from '../../adapters/protocol/jobs.js';
import type { IngestRunStatus } from '../../adapters/protocol/ingest.js';
import { ErrorCode, ShoalError } from '../../adapters/protocol/errors.js';
import { InferenceEngine } from '../../pipelines/inference/engine.js';
import { capturingLogger } from '../helpers/capturing-logger.js';
import { ErrorBody, MemoryJobs, localGateway } from '../helpers/gateway.js';
import { FIXTURE_MODELS_DIR } from '../helpers/nats-worker.js';
import { REPO_ROOT } from '../helpers/shared.js';

/**
 * Issue 42 item 16 (disclosure). Error bodies repeated the operators' messages word for word: a
 * missing model listed the models directories and the hub cache path (also in `details`), an
 * image outside the roots listed the roots, and an unexpected failure could carry a stack with
 * Node-internal frames. The body now cuts every absolute path to its last segment and drops stack
 * lines; the gateway's log keeps the full message. Real engine, real requests.
 */

/** Any absolute POSIX path of two segments or more that is not one of the gateway's own routes. */
const SERVER_PATH = /(?<![\w:/.-])\/(?!v1\/)[^\s'"`,;()[\]{}<>/]+\/[^\s'"`,;()[\]{}<>]*/;

describe('gateway: error bodies never show server paths or stacks; the log keeps them', () => {
  let roots: string;
  let engine: InferenceEngine;
  let app: FastifyInstance;
  const log = capturingLogger();

  beforeAll(async () => {
    roots = await mkdtemp(join(tmpdir(), 'shoal-disclosure-roots-'));
    engine = new InferenceEngine({ sources: { modelDirs: [FIXTURE_MODELS_DIR], allowDownload: false }, runtime: { intraOpThreads: 1 }, memoryBudget: '1GiB', images: { roots: [roots] } });
    app = localGateway(engine, {}, { logger: log.logger });
  });

  afterAll(async () => {
    await app?.close();
    await engine?.close();
    await rm(roots, { recursive: true, force: true });
  });

  const logged = (): string => JSON.stringify(log.lines());

  it('a missing model: 404 MODEL_NOT_FOUND without the models directories or the hub cache path', async () => {
    const response = await app.inject({ method: 'POST', url: '/v1/encode', payload: { model: 'nobody/missing-model', items: ['x'] } });
    expect(response.statusCode).toBe(404);
    const body = ErrorBody.parse(response.json());
    expect(body.error.code).toBe(ErrorCode.MODEL_NOT_FOUND);
    expect(body.error.message).toMatch(/nobody\/missing-model was not found/);
    expect(response.body).not.toContain(FIXTURE_MODELS_DIR);
    expect(response.body).not.toContain(REPO_ROOT);
    expect(response.body).not.toContain(homedir());
    expect(response.body).not.toMatch(SERVER_PATH);
    // The details keep their shape, each path cut to its last segment.
    expect(body.error.details).toMatchObject({ model: 'nobody/missing-model', modelDirs: ['…/models'], hubCacheDir: '…/hub' });
    // The operator still reads everything in the log.
    expect(logged()).toContain(FIXTURE_MODELS_DIR);
  });

  it('an image outside the roots: 422 without the roots', async () => {
    const response = await app.inject({ method: 'POST', url: '/v1/encode', payload: { model: 'tiny-clip', items: [{ image: '/etc/hostname' }] } });
    expect(response.statusCode).toBe(422);
    const body = ErrorBody.parse(response.json());
    expect(body.error.code).toBe(ErrorCode.INVALID_INPUT);
    expect(body.error.message).toMatch(/outside the allowed image roots/);
    expect(response.body).not.toContain(roots);
    expect(response.body).not.toMatch(SERVER_PATH);
    expect(logged()).toContain(roots);
  });

  it('an unexpected failure with a stack and Node internals: 500 INTERNAL with the first line only', async () => {
    const stackish = `TypeError: Cannot read properties of undefined (reading 'dims') in ${join(REPO_ROOT, 'dist', 'x.js')}\n    at run (${join(REPO_ROOT, 'dist', 'x.js')}:1:2)\n    at process.processTicksAndRejections (node:internal/process/task_queues:95:5)`;
    const refuse = (): never => {
      throw new ShoalError(ErrorCode.UNSUPPORTED_OPERATION, 'not in this test');
    };
    const failing: Engine = { encode: () => Promise.reject(new Error(stackish)), score: refuse, extract: refuse, tokenize: refuse, close: async () => undefined };
    const other = localGateway(failing);
    try {
      const response = await other.inject({ method: 'POST', url: '/v1/encode', payload: { model: 'tiny-bert-mean', items: ['x'] } });
      expect(response.statusCode).toBe(500);
      const body = ErrorBody.parse(response.json());
      expect(body.error.code).toBe(ErrorCode.INTERNAL);
      expect(body.error.message).toBe("TypeError: Cannot read properties of undefined (reading 'dims') in …/x.js");
      expect(response.body).not.toContain('node:internal');
      expect(response.body).not.toMatch(SERVER_PATH);
    } finally {
      await other.close();
    }
  });

  it('an ingest run status: failure reasons, the run error and the degraded mark without server paths; sources stay as sent', async () => {
    const root = '/srv/shoal/file-roots/docs';
    const status: IngestRunStatus = {
      v: WIRE_VERSION,
      job_id: 'run-1',
      kind: 'ingest',
      state: 'failed',
      pipeline: 'default',
      index: 'docs',
      documents: { total: 1, ok: 0, failed: 1, unchanged: 0 },
      pages: 0,
      ocr_pages: 0,
      chunks: 0,
      failed: [{ source: 'file:///elsewhere/a.pdf', code: ErrorCode.INVALID_INPUT, reason: `file /elsewhere/a.pdf is outside the allowed file roots (${root})` }],
      error: { code: ErrorCode.UNAVAILABLE, message: `cannot open index at ${root}/index: ENOENT` },
      degraded: { reason: `index ${root}/index refuses writes`, since: '2026-01-01T00:00:00.000Z' },
      created_at: '2026-01-01T00:00:00.000Z',
      updated_at: '2026-01-01T00:00:00.000Z',
    };
    const runs = localGateway(engine, {}, { ingest: { start: async () => status, status: async (id) => (id === 'run-1' ? status : null) } });
    try {
      const response = await runs.inject({ method: 'GET', url: '/v1/jobs/run-1' });
      expect(response.statusCode).toBe(200);
      expect(response.body).not.toContain('/srv/shoal');
      expect(response.json()).toMatchObject({
        failed: [{ source: 'file:///elsewhere/a.pdf', reason: 'file …/a.pdf is outside the allowed file roots (…/docs)' }],
        error: { message: 'cannot open index at …/index: ENOENT' },
        degraded: { reason: 'index …/index refuses writes' },
      });
    } finally {
      await runs.close();
    }
  });

  it('a primitive job: its status errors and its failed parts in the results without server paths', async () => {
    const folder = '/srv/shoal/models/broken-bert';
    const jobs = new MemoryJobs();
    const submitted = await jobs.submit({ primitive: 'encode', request: { model: 'broken-bert', items: ['a', 'b'] }, job_id: 'job-paths', part_items: 1 });
    const message = `cannot create an onnxruntime session for ${folder}/onnx/model.onnx: protobuf parsing failed`;
    const error = { code: ErrorCode.MODEL_LOAD_FAILED, message, details: { dir: folder }, cause: `Error: open ${folder}/onnx/model.onnx` };
    jobs.statuses.set('job-paths', { ...submitted.status, state: 'failed', parts_failed: 2, errors: [{ ...error, part: 0 }, { code: ErrorCode.INVALID_INPUT, message: 'file:///srv/shoal/file-roots/lnk/res is outside the allowed file roots (/srv/shoal/file-roots)', part: 1 }] });
    const withResults = Object.assign(jobs, {
      async *results(): AsyncIterable<JobPartResult> {
        yield { v: WIRE_VERSION, job_id: 'job-paths', part: 0, parts: 2, primitive: 'encode', model: 'broken-bert', status: 'error', error, worker: 'w1', finished_at: '2026-01-01T00:00:00.000Z' };
      },
    });
    const gateway = localGateway(engine, {}, { jobs: withResults });
    try {
      const status = await gateway.inject({ method: 'GET', url: '/v1/jobs/job-paths' });
      expect(status.statusCode).toBe(200);
      expect(status.body).not.toContain('/srv/shoal');
      expect(status.json()).toMatchObject({
        errors: [
          { part: 0, message: 'cannot create an onnxruntime session for …/model.onnx: protobuf parsing failed', details: { dir: '…/broken-bert' }, cause: 'Error: open …/model.onnx' },
          { part: 1, message: 'file://…/res is outside the allowed file roots (…/file-roots)' },
        ],
      });
      const results = await gateway.inject({ method: 'GET', url: '/v1/jobs/job-paths/results' });
      expect(results.statusCode).toBe(200);
      expect(results.body).not.toContain('/srv/shoal');
      expect(JSON.parse(results.body.trim())).toMatchObject({ part: 0, error: { code: ErrorCode.MODEL_LOAD_FAILED, message: expect.stringContaining('…/model.onnx') } });
    } finally {
      await gateway.close();
    }
  });
});
