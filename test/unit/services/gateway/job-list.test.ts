import type { FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ErrorCode } from '../../../../adapters/protocol/errors.js';
import { JobListResponse } from '../../../../adapters/protocol/http-responses.js';
import { RecentJobs } from '../../../../services/gateway/recent-jobs.js';
import { ErrorBody, localGateway, MemoryJobs, ScriptedEngine } from '../../../helpers/gateway.js';
import { MemoryIngest } from '../../../helpers/memory-ingest.js';

/**
 * GET /v1/jobs (the web console's runs view): the jobs and ingest runs this gateway accepted, the
 * newest first, each as GET /v1/jobs/:id answers it; refused submissions are not listed, an id
 * whose status expired drops out, `limit` bounds the answer. With tokens the list needs one,
 * while the console's files stay open.
 */

const TOKEN = 'job-list-test-token-0123456789';
const job = (id: string, items: string[]) => ({ job_id: id, primitive: 'encode', request: { model: 'tiny-bert-mean', items } });

describe('GET /v1/jobs', () => {
  let app: FastifyInstance | undefined;
  afterEach(async () => {
    await app?.close();
    app = undefined;
  });

  it('lists accepted jobs and ingest runs, the newest first, as their own status routes answer them', async () => {
    const jobs = new MemoryJobs();
    const gw = localGateway(ScriptedEngine.failing(ErrorCode.INTERNAL), { indexes: { docs: '/tmp/shoal-never-written' } }, { jobs, ingest: new MemoryIngest() });
    app = gw;
    expect(JobListResponse.parse((await gw.inject({ method: 'GET', url: '/v1/jobs' })).json())).toEqual({ jobs: [] });

    expect((await gw.inject({ method: 'POST', url: '/v1/jobs', payload: job('first', ['a', 'b']) })).statusCode).toBe(202);
    const ingest = await gw.inject({ method: 'POST', url: '/v1/ingest', payload: { index: 'docs', job_id: 'the-run', sources: [{ id: 'n1', text: 'The pilot boat leaves at dawn.' }] } });
    expect(ingest.statusCode, ingest.body).toBe(202);
    // Refused: an unknown index, a bad job. Neither is listed.
    expect((await gw.inject({ method: 'POST', url: '/v1/ingest', payload: { index: 'nope', job_id: 'refused-run', sources: [{ id: 'n1', text: 'x' }] } })).statusCode).toBe(404);
    expect((await gw.inject({ method: 'POST', url: '/v1/jobs', payload: { job_id: 'refused-job', primitive: 'encode', request: { items: ['a'] } } })).statusCode).toBe(422);
    expect((await gw.inject({ method: 'POST', url: '/v1/jobs', payload: job('third', ['c']) })).statusCode).toBe(202);

    const listed = JobListResponse.parse((await gw.inject({ method: 'GET', url: '/v1/jobs' })).json());
    expect(listed.jobs.map((entry) => entry.job_id)).toEqual(['third', 'the-run', 'first']);
    for (const entry of listed.jobs) expect(entry).toEqual((await gw.inject({ method: 'GET', url: `/v1/jobs/${entry.job_id}` })).json());
    expect(listed.jobs[1]).toMatchObject({ kind: 'ingest', index: 'docs' });
    expect(listed.jobs[2]).toMatchObject({ state: 'queued', parts: 1, items: 2 });

    const limited = JobListResponse.parse((await gw.inject({ method: 'GET', url: '/v1/jobs?limit=2' })).json());
    expect(limited.jobs.map((entry) => entry.job_id)).toEqual(['third', 'the-run']);
    // A resubmission of the same id makes it the newest.
    expect((await gw.inject({ method: 'POST', url: '/v1/jobs', payload: job('first', ['a', 'b']) })).statusCode).toBe(202);
    // A status that expired from its bucket: the id drops out of the list.
    jobs.statuses.delete('third');
    const after = JobListResponse.parse((await gw.inject({ method: 'GET', url: '/v1/jobs' })).json());
    expect(after.jobs.map((entry) => entry.job_id)).toEqual(['first', 'the-run']);

    for (const query of ['limit=0', 'limit=201', 'limit=ten', 'other=1']) {
      const refused = await gw.inject({ method: 'GET', url: `/v1/jobs?${query}` });
      expect(refused.statusCode, query).toBe(422);
      expect(ErrorBody.parse(refused.json()).error.code).toBe('INVALID_INPUT');
    }
  });

  it('lists more jobs than it reads at once in order', async () => {
    const gw = localGateway(ScriptedEngine.failing(ErrorCode.INTERNAL));
    app = gw;
    const ids = Array.from({ length: 14 }, (_, i) => `job-${i}`);
    for (const id of ids) expect((await gw.inject({ method: 'POST', url: '/v1/jobs', payload: job(id, ['a']) })).statusCode).toBe(202);
    const listed = JobListResponse.parse((await gw.inject({ method: 'GET', url: '/v1/jobs' })).json());
    expect(listed.jobs.map((entry) => entry.job_id)).toEqual([...ids].reverse());
  });

  it('keeps the newest ids only', () => {
    const recent = new RecentJobs(3);
    for (const id of ['a', 'b', 'c', 'd']) recent.remember(id);
    expect(recent.newest(10)).toEqual(['d', 'c', 'b']);
    recent.remember('b');
    expect(recent.newest(2)).toEqual(['b', 'd']);
    recent.forget('d');
    expect(recent.newest(10)).toEqual(['b', 'c']);
  });

  it('with tokens: the list needs one, the console page and its files do not', async () => {
    const gw = localGateway(ScriptedEngine.failing(ErrorCode.INTERNAL), { apiTokens: [TOKEN] });
    app = gw;
    expect((await gw.inject({ method: 'GET', url: '/v1/jobs' })).statusCode).toBe(401);
    expect((await gw.inject({ method: 'GET', url: '/v1/jobs', headers: { authorization: `Bearer ${TOKEN}` } })).statusCode).toBe(200);
    const page = await gw.inject({ method: 'GET', url: '/ui' });
    expect(page.statusCode).toBe(200);
    expect(page.headers['content-security-policy']).toContain("script-src 'self'");
    // The page names its modules; each is served, compiled for the browser (no type syntax left).
    const script = await gw.inject({ method: 'GET', url: '/ui/main.js' });
    expect(script.statusCode).toBe(200);
    expect(script.headers['content-type']).toContain('javascript');
    expect(script.body).toContain("from './api.js'");
    expect(script.body).not.toMatch(/:\s*Promise<void>/);
    expect(z.string().parse((await gw.inject({ method: 'GET', url: '/ui/console.css' })).headers['content-type'])).toContain('text/css');
    for (const url of ['/ui/main.ts', '/ui/..%2F..%2Fpackage.json', '/ui/page.js', '/ui/']) expect((await gw.inject({ method: 'GET', url })).statusCode, url).toBe(404);
  });
});
