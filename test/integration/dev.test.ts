import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { connectNats } from '../../adapters/nats/connection/connection.js';
import { JobsClient } from '../../adapters/nats/jobs/jobs-client.js';
import { EncodeResult } from '../../adapters/protocol/results.js';
import { expectAllClose } from '../helpers/conformance.js';
import { freePort, NATS_SERVER_MISSING, natsServerAvailable } from '../helpers/nats-server.js';
import { FIXTURES_DIR } from '../helpers/shared.js';
import { SHOAL_BIN } from '../helpers/shoal-cli.js';
import { l2Normalize, loadTinyModel, meanPool, tokenOutputs } from '../helpers/tiny-model.js';
import { CLI_FROM_SOURCE } from '../helpers/cli-build.js';

/**
 * `shoal dev` as a user runs it: a real child process (bin/shoal.js) on a free port with
 * SHOAL_MODEL_DIR=test/fixtures/models. It must print where it listens, answer /v1/encode with
 * the fixture's vectors, run a job to completion (polled through GET /v1/jobs/:id, results read
 * back from its NATS and written by its results sink into --results-dir), ingest documents into
 * its default index and search them (parse role and SHOAL_INDEXES default), and on SIGINT exit 0
 * with its nats-server gone and its store removed.
 */

const ATOL = 2e-5;
const bert = loadTinyModel('tiny-bert-mean');
const wrap = (...tokens: string[]): string[] => ['[CLS]', ...tokens, '[SEP]'];
const embedding = (tokens: string[]): number[] => l2Normalize(meanPool(tokenOutputs(bert, { ids: bert.ids(tokens) })));
const TEXTS = ['a dog', 'the cat sat on the mat.', 'a cat'];
const EXPECTED = [embedding(wrap('a', 'dog')), embedding(wrap('the', 'cat', 'sat', 'on', 'the', 'mat', '.')), embedding(wrap('a', 'cat'))];

const JobState = z.looseObject({ state: z.string(), parts: z.number(), parts_done: z.number(), items: z.number() });

function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

interface DevOutput {
  http: string;
  nats: string;
  natsPid: number;
  store: string;
}

/** Resolves with the printed addresses once `shoal dev` says it runs; rejects if it exits first. */
function whenRunning(child: ChildProcessWithoutNullStreams, stderr: () => string): Promise<DevOutput> {
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString('utf8');
      if (!out.includes('Press Ctrl-C to stop.')) return;
      const http = /HTTP\s+(http:\/\/\S+)/.exec(out)?.[1];
      const nats = /NATS\s+(nats:\/\/\S+)\s+\(nats-server pid (\d+), store (\S+)\)/.exec(out);
      if (http === undefined || nats === null) reject(new Error(`unexpected output:\n${out}`));
      else resolve({ http, nats: nats[1] ?? '', natsPid: Number(nats[2]), store: nats[3] ?? '' });
    });
    child.once('exit', (code) => reject(new Error(`shoal dev exited with ${String(code)} before it was ready:\n${out}\n${stderr()}`)));
  });
}

describe.skipIf(!natsServerAvailable())(`shoal dev ${natsServerAvailable() ? '' : NATS_SERVER_MISSING}`, () => {
  let child: ChildProcessWithoutNullStreams;
  let dev: DevOutput;
  let port: number;
  let stderr = '';
  let exit: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  const resultsDir = mkdtempSync(join(tmpdir(), 'shoal-dev-results-'));
  // Its working directory: the default index (./shoal-index) lands here.
  const workDir = mkdtempSync(join(tmpdir(), 'shoal-dev-cwd-'));

  beforeAll(async () => {
    port = await freePort();
    child = spawn(process.execPath, [SHOAL_BIN, 'dev', '--port', String(port), '--results-dir', resultsDir], {
      cwd: workDir,
      env: { ...process.env, SHOAL_INDEXES: '', SHOAL_FROM_SOURCE: CLI_FROM_SOURCE, SHOAL_THREADS: '1', HF_HUB_OFFLINE: '1', SHOAL_MODEL_DIR: join(FIXTURES_DIR, 'models') },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString('utf8');
    });
    exit = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
    dev = await whenRunning(child, () => stderr);
  }, 120_000);

  afterAll(async () => {
    // Only when a test failed before the SIGINT test ran.
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGKILL');
      await exit;
    }
    rmSync(resultsDir, { recursive: true, force: true });
    rmSync(workDir, { recursive: true, force: true });
  });

  it('prints the HTTP address on the requested port and its private NATS server', () => {
    expect(dev.http).toBe(`http://127.0.0.1:${port}`);
    expect(dev.nats).toMatch(/^nats:\/\/127\.0\.0\.1:\d+$/);
    expect(isRunning(dev.natsPid)).toBe(true);
    expect(existsSync(dev.store)).toBe(true);
  });

  it('answers /v1/encode with the fixture model vectors', async () => {
    const response = await fetch(`${dev.http}/v1/encode`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'tiny-bert-mean', items: TEXTS }),
    });
    expect(response.status).toBe(200);
    const result = EncodeResult.parse(await response.json());
    result.items.forEach((item, i) => expectAllClose(item.dense ?? [], EXPECTED[i] ?? [], ATOL, TEXTS[i]));
  });

  it('answers /v1/tokenize through its worker', async () => {
    const response = await fetch(`${dev.http}/v1/tokenize`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'tiny-bert-mean', items: ['a dog'] }),
    });
    expect(response.status).toBe(200);
    const body = z.looseObject({ items: z.array(z.looseObject({ tokens: z.array(z.string()) })) }).parse(await response.json());
    expect(body.items[0]?.tokens).toEqual(wrap('a', 'dog'));
  });


  it('serves TEI /embed_sparse on its first sparse encoder, and /info and /tokenize through NATS', async () => {
    const post = (path: string, body: unknown): Promise<Response> =>
      fetch(`${dev.http}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    const sparse = await post('/embed_sparse', { inputs: ['a dog'] });
    expect(sparse.status).toBe(200);
    const weights = z.array(z.array(z.object({ index: z.number().int(), value: z.number() }))).parse(await sparse.json());
    const indices = weights[0]?.map((entry) => entry.index) ?? [];
    expect(indices.length).toBeGreaterThan(0);
    expect(indices).toEqual([...indices].sort((a, b) => a - b));
    expect(weights[0]?.every((entry) => entry.value > 0)).toBe(true);

    const info = await fetch(`${dev.http}/models/tiny-bert-mean/info`);
    expect(info.status).toBe(200);
    const facts = z.looseObject({ model_id: z.string(), max_input_length: z.number().int() }).parse(await info.json());
    expect(facts.model_id).toBe('tiny-bert-mean');
    expect(facts.max_input_length).toBeGreaterThan(2);

    const tokens = await post('/models/tiny-bert-mean/tokenize', { inputs: 'a dog' });
    expect(tokens.status).toBe(200);
    const list = z.array(z.array(z.looseObject({ text: z.string(), special: z.boolean() }))).parse(await tokens.json());
    expect(list[0]?.map((token) => token.text)).toEqual(wrap('a', 'dog'));
  });
  it('runs a job to completion: POST /v1/jobs, GET /v1/jobs/:id until completed, results on its NATS', async () => {
    const submitted = await fetch(`${dev.http}/v1/jobs`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ primitive: 'encode', request: { model: 'tiny-bert-mean', items: TEXTS }, part_items: 2 }),
    });
    expect(submitted.status).toBe(202);
    const { job_id: jobId } = z.looseObject({ job_id: z.string() }).parse(await submitted.json());
    const deadline = Date.now() + 60_000;
    let status = JobState.parse(await (await fetch(`${dev.http}/v1/jobs/${jobId}`)).json());
    while (status.state !== 'completed' && status.state !== 'failed' && Date.now() < deadline) {
      // A poll interval, as an HTTP client of the job API has to use.
      await new Promise((resolve) => setTimeout(resolve, 100));
      status = JobState.parse(await (await fetch(`${dev.http}/v1/jobs/${jobId}`)).json());
    }
    expect(status).toMatchObject({ state: 'completed', parts: 2, parts_done: 2, items: 3 });

    const nc = await connectNats({ servers: [dev.nats], retryFirstConnect: false });
    try {
      const jobs = await JobsClient.open(nc);
      const vectors: number[][] = [];
      for await (const part of jobs.results(jobId)) {
        const result = EncodeResult.parse(part.result);
        for (const item of result.items) vectors[item.index] = item.dense ?? [];
      }
      expect(vectors).toHaveLength(3);
      vectors.forEach((vector, i) => expectAllClose(vector, EXPECTED[i] ?? [], ATOL, `job item ${i}`));
    } finally {
      await nc.close();
    }

    // The sink wrote both parts as JSON Lines, one line per item, indexes over the whole job.
    const folder = join(resultsDir, jobId);
    await expect.poll(() => (existsSync(folder) ? readdirSync(folder).sort() : []), { timeout: 15_000 }).toEqual(['part-000000.jsonl', 'part-000001.jsonl']);
    const Line = z.looseObject({ index: z.number(), dense: z.array(z.number()) });
    const lines = ['part-000000.jsonl', 'part-000001.jsonl'].flatMap((name) =>
      readFileSync(join(folder, name), 'utf8').trim().split('\n').map((line) => Line.parse(JSON.parse(line))),
    );
    expect(lines.map((line) => line.index)).toEqual([0, 1, 2]);
    lines.forEach((line, i) => expectAllClose(line.dense, EXPECTED[i] ?? [], ATOL, `sink line ${i}`));
  });

  it('ingests into the default index (POST /v1/ingest, parse role on) and searches it (POST /v1/search) with no settings', async () => {
    const texts = { n1: 'The pilot boat leaves at dawn.', n2: 'Fish prices rose at the Ostmund market.' };
    const submitted = await fetch(`${dev.http}/v1/ingest`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ index: 'default', model: 'tiny-bert-mean', sources: Object.entries(texts).map(([id, text]) => ({ id, text })) }),
    });
    expect(submitted.status).toBe(202);
    const { job_id: jobId } = z.looseObject({ job_id: z.string() }).parse(await submitted.json());
    const Run = z.looseObject({ state: z.string(), documents: z.looseObject({ ok: z.number(), failed: z.number() }) });
    const deadline = Date.now() + 60_000;
    let run = Run.parse(await (await fetch(`${dev.http}/v1/jobs/${jobId}`)).json());
    while (!['completed', 'partial', 'failed'].includes(run.state) && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 200));
      run = Run.parse(await (await fetch(`${dev.http}/v1/jobs/${jobId}`)).json());
    }
    expect(run).toMatchObject({ state: 'completed', documents: { ok: 2, failed: 0 } });
    expect(existsSync(join(workDir, 'shoal-index'))).toBe(true);

    const response = await fetch(`${dev.http}/v1/search`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ index: 'default', query: texts.n1, k: 2 }),
    });
    expect(response.status).toBe(200);
    const Hit = z.looseObject({ rank: z.number(), score: z.number(), source: z.string(), text: z.string() });
    const { hits } = z.object({ hits: z.array(Hit) }).parse(await response.json());
    // The query is n1's own text: its chunk is the nearest.
    expect(hits.map((hit) => hit.source)).toEqual(['n1', 'n2']);
    expect(hits[0]).toMatchObject({ rank: 1, text: texts.n1 });
    expect(hits[0]?.score ?? 0).toBeGreaterThan(hits[1]?.score ?? 1);
  }, 90_000);

  it('writes a job with an index result target into that index (its sink knows the gateway\'s indexes)', async () => {
    const submitted = await fetch(`${dev.http}/v1/jobs`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ job_id: 'dev-index-job', primitive: 'encode', request: { model: 'tiny-bert-mean', items: [{ id: 'lamp', text: 'The lighthouse lamp turns all night.' }] }, result: { kind: 'index', index: 'default' } }),
    });
    expect(submitted.status, await submitted.clone().text()).toBe(202);
    // Searchable once the sink has written the row (the tiny random model ranks nothing, so the row is looked for by id).
    const Hit = z.looseObject({ id: z.string(), source: z.string(), text: z.string() });
    const deadline = Date.now() + 60_000;
    let hits: z.infer<typeof Hit>[] = [];
    while (Date.now() < deadline) {
      const response = await fetch(`${dev.http}/v1/search`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ index: 'default', query: 'The lighthouse lamp turns all night.', k: 10 }),
      });
      if (response.status === 200) hits = z.object({ hits: z.array(Hit) }).parse(await response.json()).hits;
      if (hits.some((hit) => hit.id === 'lamp')) break;
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    expect(hits.find((hit) => hit.id === 'lamp'), JSON.stringify(hits)).toMatchObject({ source: 'shoal-job://dev-index-job/part-0', text: 'The lighthouse lamp turns all night.' });
    const status = z.looseObject({ state: z.string() }).passthrough().parse(await (await fetch(`${dev.http}/v1/jobs/dev-index-job`)).json());
    expect(status).not.toHaveProperty('degraded');
  }, 90_000);

  it('stops on SIGINT: exit code 0, nats-server gone, its store removed', async () => {
    child.kill('SIGINT');
    const { code, signal } = await exit;
    expect({ code, signal }).toEqual({ code: 0, signal: null });
    expect(stderr).toContain('shoal dev: stopped');
    expect(isRunning(dev.natsPid)).toBe(false);
    expect(existsSync(dev.store)).toBe(false);
  }, 60_000);
});

describe.skipIf(!natsServerAvailable())(`shoal dev killed with SIGKILL ${natsServerAvailable() ? '' : NATS_SERVER_MISSING}`, () => {
  it('leaves no nats-server and no store behind', async () => {
    const workDir = mkdtempSync(join(tmpdir(), 'shoal-dev-kill-'));
    let stderr = '';
    const child = spawn(process.execPath, [SHOAL_BIN, 'dev', '--port', String(await freePort()), '--results-dir', join(workDir, 'results')], {
      cwd: workDir,
      env: { ...process.env, SHOAL_INDEXES: '', SHOAL_FROM_SOURCE: CLI_FROM_SOURCE, SHOAL_THREADS: '1', HF_HUB_OFFLINE: '1', SHOAL_MODEL_DIR: join(FIXTURES_DIR, 'models') },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString('utf8');
    });
    try {
      const dev = await whenRunning(child, () => stderr);
      expect(isRunning(dev.natsPid)).toBe(true);
      child.kill('SIGKILL');
      // No exit handler runs in Shoal: the guard sees its pipe close and stops the server.
      const deadline = Date.now() + 15_000;
      while ((isRunning(dev.natsPid) || existsSync(dev.store)) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 100));
      expect(isRunning(dev.natsPid)).toBe(false);
      expect(existsSync(dev.store)).toBe(false);
    } finally {
      child.kill('SIGKILL');
      rmSync(workDir, { recursive: true, force: true });
    }
  }, 120_000);
});
