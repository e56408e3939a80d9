import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { exited, expectSameRows, INGEST_ENV, readRows, startWorkerProcess } from '../helpers/ingest-nats.js';
import { natsServerAvailable, NATS_SERVER_MISSING, startNatsServer, type NatsServerHandle } from '../helpers/nats-server.js';
import { TINY_MEAN, uniquePrefix } from '../helpers/nats-worker.js';
import { DATA_DIR } from '../helpers/shared.js';
import { jsonl, runShoal, SHOAL_BIN } from '../helpers/shoal-cli.js';
import { CLI_FROM_SOURCE } from '../helpers/cli-build.js';

/**
 * At least once, nothing twice: the only worker of a `shoal ingest --nats` run is killed with
 * SIGKILL while the run is under way (parse tasks and encode parts in its hands, unacked) and a
 * new worker is started. The coordinator waits it out (its tasks come back after the ack wait,
 * its token-count calls are retried) and the run ends with exactly the rows of an in-process run
 * of the same records: no row missing, none duplicated.
 */

const Record = z.object({ _id: z.string(), title: z.string(), text: z.string() });
const RECORDS = readFileSync(join(DATA_DIR, 'scifact', 'corpus.jsonl'), 'utf8')
  .split('\n')
  .filter((line) => line.trim() !== '')
  .slice(0, 150)
  .map((line) => Record.parse(JSON.parse(line)))
  .map((record) => ({ id: record._id, text: `${record.title}\n\n${record.text}` }));

const Summary = z.object({ documents: z.object({ total: z.number(), ok: z.number(), failed: z.number(), unchanged: z.number() }), chunks: z.number() });

/** Runs the CLI and resolves once its stderr contains `marker` (the coordinator has started), and again at exit. */
function startIngest(args: readonly string[], env: Record<string, string>, stdin: string): { started: Promise<void>; done: Promise<{ code: number | null; stdout: string; stderr: string }> } {
  const child: ChildProcess = spawn(process.execPath, [SHOAL_BIN, ...args], { cwd: tmpdir(), env: { ...process.env, SHOAL_FROM_SOURCE: CLI_FROM_SOURCE, SHOAL_THREADS: '1', ...env }, stdio: ['pipe', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  let resolveStarted: () => void = () => undefined;
  const started = new Promise<void>((resolve) => (resolveStarted = resolve));
  child.stdout?.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr += chunk.toString('utf8');
    if (stderr.includes('ingest run ')) resolveStarted();
  });
  child.stdin?.end(stdin);
  const done = new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => child.on('close', (code) => resolve({ code, stdout, stderr })));
  return { started, done };
}

describe.skipIf(!natsServerAvailable())('shoal ingest --nats: a worker killed mid-run', () => {
  let server: NatsServerHandle;
  let root: string;
  const workers: ChildProcess[] = [];
  const prefix = uniquePrefix('ingestkill');

  beforeAll(async () => {
    server = await startNatsServer();
    root = await mkdtemp(join(tmpdir(), 'shoal-ingest-kill-'));
  }, 30_000);

  afterAll(async () => {
    for (const worker of workers) {
      if (worker.exitCode === null && worker.signalCode === null) worker.kill('SIGKILL');
      await exited(worker);
    }
    await server?.stop();
    await rm(root, { recursive: true, force: true });
  }, 30_000);

  it(natsServerAvailable() ? 'SIGKILL of the only worker and a restart: the run completes with exactly the rows of an undisturbed run' : NATS_SERVER_MISSING, async () => {
    const args = (index: string): string[] => ['ingest', '-', '--no-progress', '--model', TINY_MEAN, '--index', index, '--json'];
    const first = startWorkerProcess(server.url, prefix);
    workers.push(first);
    const natsIndex = join(root, 'nats');
    const remote = startIngest([...args(natsIndex), '--nats', server.url], { ...INGEST_ENV, SHOAL_SUBJECT_PREFIX: prefix }, jsonl(RECORDS));
    // The reference run in process meanwhile (its own engine, no NATS).
    const localIndex = join(root, 'local');
    const local = runShoal(args(localIndex), { env: INGEST_ENV, stdin: jsonl(RECORDS) });

    await remote.started;
    // Let the worker take parse tasks and encode parts, then kill it without warning.
    await new Promise((resolve) => setTimeout(resolve, 4_000));
    first.kill('SIGKILL');
    await exited(first);
    let finishedEarly = false;
    void Promise.race([remote.done.then(() => (finishedEarly = true)), new Promise((resolve) => setTimeout(resolve, 100))]);
    await new Promise((resolve) => setTimeout(resolve, 150));
    expect(finishedEarly, 'the run must still be going when its worker is killed').toBe(false);
    workers.push(startWorkerProcess(server.url, prefix));

    const [remoteRun, localRun] = await Promise.all([remote.done, local]);
    expect(localRun.code, localRun.stderr).toBe(0);
    expect(remoteRun.code, remoteRun.stderr).toBe(0);
    const summary = Summary.parse(JSON.parse(remoteRun.stdout.trim().split('\n').at(-1) ?? '{}'));
    expect(summary.documents).toEqual({ total: RECORDS.length, ok: RECORDS.length, failed: 0, unchanged: 0 });
    const localRows = await readRows(localIndex);
    const remoteRows = await readRows(natsIndex);
    expect(new Set(remoteRows.map((row) => row.id)).size).toBe(remoteRows.length);
    expect(remoteRows.length).toBe(summary.chunks);
    expectSameRows(localRows, remoteRows);
  }, 180_000);
});
