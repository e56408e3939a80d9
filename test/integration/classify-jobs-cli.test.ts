import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { text } from 'node:stream/consumers';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { Classification } from '../../adapters/protocol/classify.js';
import { ClassifyProducer } from '../../pipelines/classify/classify-producer.js';
import type { ShoalWorker } from '../../services/worker/worker.js';
import { CLI_FROM_SOURCE } from '../helpers/cli-build.js';
import { NATS_SERVER_MISSING, natsServerAvailable, startNatsServer, type NatsServerHandle } from '../helpers/nats-server.js';
import { FIXTURE_MODELS_DIR, TINY_CROSS, TINY_MEAN, startTestWorker, testConnection } from '../helpers/nats-worker.js';
import { DATA_DIR, sharedAvailable } from '../helpers/shared.js';
import { runShoal, SHOAL_BIN } from '../helpers/shoal-cli.js';

/**
 * `shoal classify --nats URL` as a producer of classification jobs and `shoal worker --classify`
 * child processes as the only ones that classify (issue 35, item 5):
 * - the lines (retrieval only, and with a cross-encoder rerank) are those of an in-process
 *   `shoal classify` of the same catalog, in catalog order, products without text included as
 *   error lines in their place (exit 3 both ways), and `--gold` prints the same evaluation;
 * - 1,050 products published with `--detach` in chunks of 25; the classify worker is SIGKILLed
 *   mid-run and another started (with an empty cache folder: it reads the category matrix from
 *   the object store); the run completes with every chunk counted once, and its results are the
 *   lines of an undisturbed in-process run.
 */

const PRODUCTS = join(DATA_DIR, 'products', 'flipkart-1050.jsonl');
const GOOGLE = join(DATA_DIR, 'taxonomy', 'google-taxonomy-with-ids.en-US.txt');
const available = natsServerAvailable() && sharedAvailable(PRODUCTS) && sharedAvailable(GOOGLE);

const Line = z.union([Classification, z.strictObject({ id: z.union([z.string(), z.number()]), error: z.strictObject({ code: z.string(), message: z.string() }) })]);
type Line = z.infer<typeof Line>;

/**
 * Line for line the same decisions; scores may differ in the last float32 digits (the vectors
 * come from other batches on the model worker), so candidates whose scores tie within 1e-5 may
 * swap places: there only the score is compared, every other place by id.
 */
function expectSameLines(remote: readonly Line[], local: readonly Line[]): void {
  expect(remote.map((line) => line.id)).toEqual(local.map((line) => line.id));
  local.forEach((want, index) => {
    const got = remote[index] as Line;
    if ('error' in want || 'error' in got) {
      expect(got).toEqual(want);
      return;
    }
    expect(got.decided_by).toBe(want.decided_by);
    expect(got.needs_review).toBe(want.needs_review);
    const ranked = (line: Classification) => [{ id: line.category.id, score: line.score }, ...line.alternatives.map((a) => ({ id: a.id, score: a.score }))];
    const a = ranked(got);
    const b = ranked(want);
    expect(a.length).toBe(b.length);
    b.forEach((entry, at) => {
      expect(Math.abs((a[at]?.score ?? Number.NaN) - entry.score)).toBeLessThan(1e-5);
      const tied = b.filter((other) => Math.abs(other.score - entry.score) < 1e-5).map((other) => other.id);
      if (tied.length === 1 && at < b.length - 1) expect(a[at]?.id).toBe(entry.id);
    });
  });
}

function readLines(path: string): Line[] {
  return readFileSync(path, 'utf8')
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => Line.parse(JSON.parse(line)));
}

describe.skipIf(!available)(`classification jobs through the CLI ${natsServerAvailable() ? '' : NATS_SERVER_MISSING}`, () => {
  let server: NatsServerHandle;
  let modelWorker: ShoalWorker | null = null;
  let nc: NatsConnection;
  let producer: ClassifyProducer;
  const dir = mkdtempSync(join(tmpdir(), 'shoal-classify-jobs-cli-'));
  const catalog = join(dir, 'products.jsonl');
  const whole = join(dir, 'all.jsonl');
  const children: { child: ChildProcess; stderr: () => string }[] = [];
  const env = (cache: string): Record<string, string> => ({ SHOAL_MODEL_DIR: FIXTURE_MODELS_DIR, SHOAL_CACHE_DIR: join(dir, cache), NATS_URL: server.url });

  function startClassifyWorker(cache: string): { child: ChildProcess; stderr: () => string } {
    const child = spawn(process.execPath, [SHOAL_BIN, 'worker', '--classify', '--ack-wait', '3000'], {
      cwd: tmpdir(),
      env: { ...process.env, ...env(cache), SHOAL_FROM_SOURCE: CLI_FROM_SOURCE, SHOAL_THREADS: '1', SHOAL_LOG_LEVEL: 'info' },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
    const handle = { child, stderr: () => stderr };
    children.push(handle);
    return handle;
  }

  async function stop(child: ChildProcess, signal: NodeJS.Signals): Promise<void> {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill(signal);
    await exited;
  }

  beforeAll(async () => {
    server = await startNatsServer();
    modelWorker = await startTestWorker(server.url, 'shoal', { models: [TINY_MEAN, TINY_CROSS], concurrency: 8 });
    nc = await testConnection(server.url);
    producer = await ClassifyProducer.open(nc);
    const records = readFileSync(PRODUCTS, 'utf8').split('\n').filter((line) => line.trim() !== '');
    // Two products without text: error lines in their place, both ways.
    const some = [...records.slice(0, 10), JSON.stringify({ uniq_id: 'blank-1', title: ' ' }), ...records.slice(10, 70), JSON.stringify({ uniq_id: 'blank-2' }), ...records.slice(70, 118)];
    writeFileSync(catalog, `${some.join('\n')}\n`);
    writeFileSync(whole, `${records.join('\n')}\n`);
  }, 60_000);

  afterAll(async () => {
    for (const { child } of children) await stop(child, 'SIGKILL');
    producer?.close();
    await nc?.close();
    await modelWorker?.close().catch(() => undefined);
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  }, 30_000);

  const classify = async (name: string, args: readonly string[], cache: string, code: number): Promise<{ lines: Line[]; stdout: string }> => {
    const out = join(dir, `${name}.jsonl`);
    const run = await runShoal(['classify', catalog, '--taxonomy', GOOGLE, '--model', TINY_MEAN, '--id-field', 'uniq_id', '--top-k', '3', '--out', out, '--chunk-lines', '32', '--no-progress', ...args], { env: env(cache) });
    expect(run.code, run.stderr).toBe(code);
    expect(run.stderr).toContain('classified 118 products');
    expect(run.stderr).toContain('2 without text (error lines)');
    return { lines: readLines(out), stdout: run.stdout };
  };

  it(natsServerAvailable() ? 'publishes the catalog as classification jobs and writes the lines of an in-process run, in catalog order' : NATS_SERVER_MISSING, async () => {
    const worker = startClassifyWorker('cache-worker-1');
    for (const [name, extra] of [
      ['retrieve', ['--gold', 'category_tree_raw', '--json']],
      ['rerank', ['--rerank-model', TINY_CROSS, '--rerank-top', '8']],
    ] as const) {
      const local = await classify(`${name}-local`, extra, 'cache-local', 3);
      const remote = await classify(`${name}-jobs`, [...extra, '--nats', server.url], 'cache-cli', 3);
      expect(local.lines).toHaveLength(120);
      expectSameLines(remote.lines, local.lines);
      expect(remote.lines.filter((line) => 'error' in line).map((line) => line.id)).toEqual(['blank-1', 'blank-2']);
      // --gold: the same evaluation, from the results read back.
      expect(remote.stdout).toBe(local.stdout);
    }
    // The worker embedded the taxonomy once, and stored it for the others.
    expect(worker.stderr()).toContain('category matrix embedded and stored');

    // Mistakes: what a classification job cannot do.
    const resume = await runShoal(['classify', catalog, '--taxonomy', GOOGLE, '--nats', server.url, '--out', join(dir, 'x.jsonl'), '--resume'], { env: env('cache-cli') });
    expect(resume.code).toBe(2);
    expect(resume.stderr).toContain('--resume continues an output written here');
    const detachOut = await runShoal(['classify', catalog, '--taxonomy', GOOGLE, '--nats', server.url, '--detach', '--out', join(dir, 'y.jsonl')], { env: env('cache-cli') });
    expect(detachOut.code).toBe(2);
    // A bad line mid-catalog stops the publishing (exit 2) and fails the run: its chunks could never make a whole.
    const broken = join(dir, 'broken.jsonl');
    writeFileSync(broken, `${readFileSync(catalog, 'utf8').split('\n').slice(0, 60).join('\n')}\n{not json\n`);
    const bad = await runShoal(['classify', broken, '--taxonomy', GOOGLE, '--model', TINY_MEAN, '--nats', server.url, '--chunk-lines', '16', '--no-progress'], { env: env('cache-cli') });
    expect(bad.code, bad.stderr).toBe(2);
    expect(bad.stderr).toContain('not valid JSON');
    const badRun = /classify run ([0-9a-f-]{36})/.exec(bad.stderr)?.[1] ?? '';
    expect(await producer.follow(badRun)).toMatchObject({ state: 'failed', error: { code: 'INVALID_INPUT' } });
    const detachLocal = await runShoal(['classify', catalog, '--taxonomy', GOOGLE, '--detach'], { env: env('cache-cli') });
    expect(detachLocal.code).toBe(2);
    expect(detachLocal.stderr).toContain('--detach publishes classification jobs');
    await stop(worker.child, 'SIGTERM');
  }, 300_000);

  it(natsServerAvailable() ? 'survives SIGKILL of the classify worker: every chunk counted once, the results those of an undisturbed run' : NATS_SERVER_MISSING, async () => {
    const detached = await runShoal(['classify', whole, '--taxonomy', GOOGLE, '--model', TINY_MEAN, '--id-field', 'uniq_id', '--top-k', '3', '--chunk-lines', '25', '--nats', server.url, '--detach'], { env: env('cache-cli') });
    expect(detached.code, detached.stderr).toBe(0);
    const runId = detached.stdout.trim();
    expect(runId).toMatch(/^[0-9a-f-]{36}$/);
    expect(await producer.status(runId)).toMatchObject({ state: 'queued', chunks_done: 0 });

    // Kill the classify worker once some chunks are counted, then start another with an empty cache folder.
    const first = startClassifyWorker('cache-worker-2');
    const deadline = Date.now() + 120_000;
    while (((await producer.status(runId))?.chunks_done ?? 0) < 6 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
    const before = await producer.status(runId);
    expect(before?.state).toBe('running');
    await stop(first.child, 'SIGKILL');
    const second = startClassifyWorker('cache-worker-3');

    const record = await producer.follow(runId);
    expect(record).toMatchObject({ state: 'completed', items: 1050, items_done: 1050, chunks: 42, chunks_done: 42, error: null });
    if (record === null) throw new Error('no status');
    const remote = (await text(await producer.results(record)))
      .split('\n')
      .filter((line) => line !== '')
      .map((line) => Line.parse(JSON.parse(line)));
    // The restarted worker read the matrix the first one stored (its own cache folder was empty).
    expect(second.stderr()).toContain('category matrix read from the object store');

    const out = join(dir, 'whole-local.jsonl');
    const local = await runShoal(['classify', whole, '--taxonomy', GOOGLE, '--model', TINY_MEAN, '--id-field', 'uniq_id', '--top-k', '3', '--out', out, '--no-progress'], { env: env('cache-local') });
    expect(local.code, local.stderr).toBe(0);
    expect(remote).toHaveLength(1050);
    expectSameLines(remote, readLines(out));
    await stop(second.child, 'SIGTERM');
  }, 300_000);
});
