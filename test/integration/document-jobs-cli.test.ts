import { spawn, type ChildProcess } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jetstream } from '@nats-io/jetstream';
import { DocumentEvent } from '../../adapters/protocol/documents.js';
import type { ShoalWorker } from '../../services/worker/worker.js';
import { CLI_FROM_SOURCE } from '../helpers/cli-build.js';
import { IngestJsonSummary } from '../helpers/ingest-summary.js';
import { expectSameRows, readRows } from '../helpers/ingest-nats.js';
import { natsServerAvailable, NATS_SERVER_MISSING, startNatsServer, type NatsServerHandle } from '../helpers/nats-server.js';
import { FIXTURE_MODELS_DIR, TINY_MEAN, startTestWorker, testConnection } from '../helpers/nats-worker.js';
import { DATA_DIR, REPO_ROOT } from '../helpers/shared.js';
import { jsonl, runShoal, SHOAL_BIN } from '../helpers/shoal-cli.js';

/**
 * `shoal ingest --nats URL --index NAME` as a producer of document jobs and `shoal worker
 * --documents` as the only process that touches the index (issue 35, items 2 and 4):
 * - the README's sample folder and two shared PDFs (one encrypted) give the rows of an in-process
 *   run of the same pipeline file: ids, texts, pages, vectors within 1e-5, the same failure, exit 3;
 * - 300 records published with `--detach` while no documents worker runs; the documents worker is
 *   SIGKILLed mid-run and restarted; `shoal runs watch` sees every document end once, committed,
 *   and the index holds exactly the rows of an undisturbed in-process run.
 */

const PDFS = join(DATA_DIR, 'pdfs');
const SOURCES = [join(REPO_ROOT, 'examples', 'docs'), join(PDFS, '001-trivial__minimal-document.pdf'), join(PDFS, '005-libreoffice-writer-password__libreoffice-writer-password.pdf')];

describe.skipIf(!natsServerAvailable())('document jobs through the CLI', () => {
  let server: NatsServerHandle;
  let root: string;
  let pipelines: string;
  let modelWorker: ShoalWorker | null = null;
  const children: ChildProcess[] = [];
  const env = (): Record<string, string> => ({ SHOAL_MODEL_DIR: FIXTURE_MODELS_DIR, SHOAL_PIPELINES: pipelines, SHOAL_INDEXES: `docs=${join(root, 'docs')},records=${join(root, 'records')},terms=${join(root, 'terms')}`, NATS_URL: server.url });

  function startDocumentsWorker(extra: readonly string[] = ['--ack-wait', '3000']): ChildProcess {
    const child = spawn(process.execPath, [SHOAL_BIN, 'worker', '--documents', '--pipelines', 'tiny', ...extra], {
      cwd: tmpdir(),
      env: { ...process.env, ...env(), SHOAL_FROM_SOURCE: CLI_FROM_SOURCE, SHOAL_THREADS: '1', SHOAL_LOG_LEVEL: 'warn' },
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    children.push(child);
    return child;
  }

  beforeAll(async () => {
    server = await startNatsServer();
    root = await mkdtemp(join(tmpdir(), 'shoal-docjobs-cli-'));
    pipelines = join(root, 'pipelines');
    await mkdir(pipelines);
    await writeFile(join(pipelines, 'tiny.yaml'), `name: tiny\nstages:\n  encode:\n    model: ${TINY_MEAN}\n`);
    modelWorker = await startTestWorker(server.url, 'shoal', { concurrency: 8 });
  }, 60_000);

  afterAll(async () => {
    for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await modelWorker?.close().catch(() => undefined);
    await server?.stop();
    await rm(root, { recursive: true, force: true });
  }, 30_000);

  it(natsServerAvailable() ? 'publishes files as document jobs and gives the rows of an in-process run' : NATS_SERVER_MISSING, async () => {
    const worker = startDocumentsWorker();
    const local = join(root, 'local-files');
    const [inProcess, produced] = await Promise.all([
      runShoal(['ingest', ...SOURCES, '--no-progress', '--pipeline', join(pipelines, 'tiny.yaml'), '--index', local, '--json'], { env: env() }),
      runShoal(['ingest', ...SOURCES, '--no-progress', '--pipeline', 'tiny', '--nats', server.url, '--index', 'docs', '--json'], { env: env() }),
    ]);
    expect(inProcess.code, inProcess.stderr).toBe(3);
    expect(produced.code, produced.stderr).toBe(3);
    const line = JSON.parse(produced.stdout.trim().split('\n').at(-1) ?? '{}') as Record<string, unknown>;
    const { run_id: _run, ...rest } = line;
    const summary = IngestJsonSummary.parse(rest);
    const reference = IngestJsonSummary.parse(JSON.parse(inProcess.stdout.trim().split('\n').at(-1) ?? '{}'));
    expect(summary.documents).toEqual(reference.documents);
    expect(summary.chunks).toBe(reference.chunks);
    expect(summary.pages).toBe(reference.pages);
    expect(summary.ocr_pages).toBe(reference.ocr_pages);
    expect(summary.ocr_pages).toBeGreaterThan(0);
    expect(summary.failed.map((failure) => [failure.source, failure.code])).toEqual(reference.failed.map((failure) => [failure.source, failure.code]));
    expect(line.run_id).toMatch(/^[0-9a-f-]{36}$/);
    expectSameRows(await readRows(local), await readRows(join(root, 'docs')));

    // Mistakes: an option a job cannot carry, and --detach without a named index.
    const model = await runShoal(['ingest', SOURCES[0] ?? '', '--nats', server.url, '--index', 'docs', '--model', TINY_MEAN], { env: env() });
    expect(model.code).toBe(2);
    expect(model.stderr).toContain('--model cannot travel with a document job');
    const detach = await runShoal(['ingest', SOURCES[0] ?? '', '--detach', '--index', join(root, 'x')], { env: env() });
    expect(detach.code).toBe(2);
    expect(detach.stderr).toContain('--detach publishes document jobs');
    worker.kill('SIGTERM');
    await new Promise((resolve) => worker.once('exit', resolve));
  }, 240_000);

  it(natsServerAvailable() ? 'warns when no documents worker serves the pipeline, and Ctrl-C stops only the watching' : NATS_SERVER_MISSING, async () => {
    const child = spawn(process.execPath, [SHOAL_BIN, 'ingest', '-', '--pipeline', 'nobody', '--nats', server.url, '--index', 'records', '--json'], {
      cwd: tmpdir(),
      env: { ...process.env, ...env(), SHOAL_FROM_SOURCE: CLI_FROM_SOURCE },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    children.push(child);
    let stderr = '';
    let stdout = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
    child.stdin.end(jsonl([{ id: 'lonely', text: 'Nobody serves this pipeline.' }]));
    const deadline = Date.now() + 30_000;
    while (!stderr.includes('no documents worker serves pipeline nobody') && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 200));
    expect(stderr).toContain('start `shoal worker --documents --pipelines nobody`');
    child.kill('SIGINT');
    const code = await new Promise<number | null>((resolve) => child.once('exit', (exitCode) => resolve(exitCode)));
    expect(code).toBe(130);
    expect(stderr).toContain('only the watching stopped; the workers go on with run');
    expect(JSON.parse(stdout.trim())).toMatchObject({ interrupted: true, documents: { total: 1, ok: 0, failed: 0, unchanged: 0 } });
  }, 60_000);

  it(natsServerAvailable() ? 'hands its jobs back on SIGTERM past the drain deadline: another worker finishes them long before the ack wait' : NATS_SERVER_MISSING, async () => {
    const records = Array.from({ length: 200 }, (_, n) => ({ id: `term-${n}`, text: `Handed back ${n}: the quay lights turn on at dusk. `.repeat(2 + (n % 6)) }));
    const detached = await runShoal(['ingest', '-', '--pipeline', 'tiny', '--nats', server.url, '--index', 'terms', '--detach', '--json'], { env: env(), stdin: jsonl(records) });
    expect(detached.code, detached.stderr).toBe(0);
    const { run_id: runId } = JSON.parse(detached.stdout.trim()) as { run_id: string };
    const nc = await testConnection(server.url);
    const js = jetstream(nc);
    // An ack wait of a minute: without the hand-back, the jobs it held would wait that long.
    const first = startDocumentsWorker(['--ack-wait', '60000', '--drain-timeout', '200']);
    for (const deadline = Date.now() + 120_000; Date.now() < deadline; ) {
      const info = await (await js.streams.get('SHOAL_EVENTS')).info(false, { subjects_filter: `shoal.events.documents.${runId}` }).catch(() => null);
      if ((info?.state.messages ?? 0) >= 20) break;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    first.kill('SIGTERM');
    await new Promise((resolve) => first.once('exit', resolve));
    const stopped = Date.now();
    startDocumentsWorker(['--ack-wait', '60000']);
    const watched = await runShoal(['runs', 'watch', runId, '--json', '--nats', server.url], { env: env() });
    await nc.close();
    expect(watched.code, watched.stderr).toBe(0);
    expect(JSON.parse(watched.stdout.trim())).toMatchObject({ state: 'completed', documents: { total: 200, ok: 200, failed: 0, unchanged: 0 } });
    expect(Date.now() - stopped).toBeLessThan(45_000);
  }, 240_000);

  it(natsServerAvailable() ? 'survives SIGKILL of the documents worker: every document ends once, and the rows equal an undisturbed run' : NATS_SERVER_MISSING, async () => {
    // Every tenth record carries metadata: it travels in its document job and is stored with its rows.
    const records = Array.from({ length: 300 }, (_, n) => ({ id: `rec-${n}`, text: `Record ${n}: ${['harbour pilots guide ships', 'tides follow the moon', 'dredging keeps channels deep', 'fish markets open at dawn'][n % 4]} in paragraph ${n}. `.repeat(1 + (n % 5)), ...(n % 10 === 0 ? { metadata: { n, tags: ['tenth'] } } : {}) }));
    const detached = await runShoal(['ingest', '-', '--pipeline', 'tiny', '--nats', server.url, '--index', 'records', '--detach', '--json'], { env: env(), stdin: jsonl(records) });
    expect(detached.code, detached.stderr).toBe(0);
    const { run_id: runId, documents } = JSON.parse(detached.stdout.trim()) as { run_id: string; documents: number };
    expect(documents).toBe(300);

    // Kill the documents worker once some documents ended, then start another.
    const nc = await testConnection(server.url);
    const js = jetstream(nc);
    const first = startDocumentsWorker();
    const deadline = Date.now() + 120_000;
    for (;;) {
      const info = await (await js.streams.get('SHOAL_EVENTS')).info(false, { subjects_filter: `shoal.events.documents.${runId}` }).catch(() => null);
      if ((info?.state.messages ?? 0) >= 40 || Date.now() > deadline) break;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    first.kill('SIGKILL');
    await new Promise((resolve) => first.once('exit', resolve));
    startDocumentsWorker();

    const watched = await runShoal(['runs', 'watch', runId, '--json', '--nats', server.url], { env: env() });
    expect(watched.code, watched.stderr).toBe(0);
    const end = JSON.parse(watched.stdout.trim()) as { state: string; documents: Record<string, number> };
    expect(end.state).toBe('completed');
    expect(end.documents).toEqual({ total: 300, ok: 300, failed: 0, unchanged: 0 });

    // Exactly one stored event per document (repeats of a redone document deduplicated), each committed.
    const consumer = await js.consumers.get('SHOAL_EVENTS', { filter_subjects: `shoal.events.documents.${runId}` });
    const events: DocumentEvent[] = [];
    for await (const msg of await consumer.fetch({ max_messages: 1000, expires: 2000 })) events.push(DocumentEvent.parse(msg.json()));
    await nc.close();
    expect(events).toHaveLength(300);
    expect(new Set(events.map((event) => event.doc)).size).toBe(300);
    expect(events.every((event) => event.state === 'committed')).toBe(true);

    const local = join(root, 'local-records');
    const inProcess = await runShoal(['ingest', '-', '--no-progress', '--pipeline', join(pipelines, 'tiny.yaml'), '--index', local], { env: env(), stdin: jsonl(records) });
    expect(inProcess.code, inProcess.stderr).toBe(0);
    expectSameRows(await readRows(local), await readRows(join(root, 'records')));
    for (const index of [join(root, 'records'), local]) {
      const found = await runShoal(['search', 'harbour pilots', '--index', index, '--k', '200', '--filter', "metadata.n >= 250 AND metadata.tags = 'tenth'"], { env: env() });
      expect(found.code, found.stderr).toBe(0);
      const hits = found.stdout.trim().split('\n').map((line) => JSON.parse(line) as { source: string; metadata: { n: number } });
      expect([...new Set(hits.map((hit) => hit.source))].sort()).toEqual(['rec-250', 'rec-260', 'rec-270', 'rec-280', 'rec-290']);
      expect(hits.every((hit) => hit.source === `rec-${hit.metadata.n}`)).toBe(true);
    }
  }, 300_000);
});
