import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { exited, INGEST_ENV, startWorkerProcess } from '../helpers/ingest-nats.js';
import { committedDocuments, IngestJsonSummary } from '../helpers/ingest-summary.js';
import { natsServerAvailable, NATS_SERVER_MISSING, startNatsServer } from '../helpers/nats-server.js';
import { TINY_MEAN, uniquePrefix } from '../helpers/nats-worker.js';
import { FIXTURES_DIR } from '../helpers/shared.js';
import { runShoal } from '../helpers/shoal-cli.js';
import { startShoal, type ShoalProcess } from '../helpers/shoal-process.js';

/**
 * `shoal ingest` stopped by Ctrl-C or SIGTERM still prints its summary of what finished before the
 * stop (with `--json`: the usual object plus `"interrupted": true`), and keeps the interrupt's exit
 * status; the re-run continues where it stopped. In process and with `--nats` (a private
 * nats-server and a real `shoal worker --parse`). Real child processes, the tiny fixture encoder
 * and a real LanceDB index; small commits, so the signal lands between two of them.
 */

const MODEL = join(FIXTURES_DIR, 'models', 'tiny-bert-mean');
const FILES = 160;
const root = await mkdtemp(join(tmpdir(), 'shoal-ingest-interrupt-'));
afterAll(() => rm(root, { recursive: true, force: true }));

const docs = join(root, 'docs');
await mkdir(docs);
for (let i = 0; i < FILES; i += 1) {
  await writeFile(join(docs, `note-${String(i).padStart(3, '0')}.txt`), `Note ${i} about the harbour, its tides and lighthouse number ${i}.`);
}
// One chunk per file and a commit every 4 rows: many commits, each a moment apart.
const pipeline = join(root, 'tiny-commits.yaml');
await writeFile(pipeline, 'name: tiny-commits\nstages:\n  write: {batchRows: 4}\n');


const args = (index: string, json: boolean, extra: readonly string[] = []): string[] => ['ingest', '--no-progress', '--model', MODEL, '--pipeline', pipeline, '--index', index, ...(json ? ['--json'] : []), ...extra, docs];


/** Starts the ingest, waits until a first commit landed, sends `signal`; resolves with exit code and stdout alone. */
async function interruptAfterFirstCommit(
  command: readonly string[],
  index: string,
  signal: NodeJS.Signals,
  env: Record<string, string> = {},
): Promise<{ code: number | null; stdout: string; output: string }> {
  const run: ShoalProcess = startShoal(command, { env });
  run.child.stdin.end();
  let stdout = '';
  run.child.stdout.on('data', (chunk: Buffer) => {
    stdout += chunk.toString('utf8');
  });
  const deadline = Date.now() + 60_000;
  while ((await committedDocuments(index)) === 0) {
    if (run.child.exitCode !== null) throw new Error(`ingest exited before its first commit:\n${run.output()}`);
    if (Date.now() > deadline) throw new Error(`no commit within 60 s:\n${run.output()}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  const stopped = await run.stop(signal);
  return { code: stopped.code, stdout, output: run.output() };
}

/** CPU ticks a process has used (Linux /proc), or null where there is no /proc. */
async function cpuTicks(pid: number): Promise<number | null> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => null);
  if (stat === null) return null;
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return Number(fields[11]) + Number(fields[12]);
}

/** Resolves once `pid` has used no CPU for a second (start-up over, blocked on input); 10 s without /proc. */
async function idle(pid: number): Promise<void> {
  const deadline = Date.now() + 60_000;
  let last = await cpuTicks(pid);
  if (last === null) return new Promise((resolve) => setTimeout(resolve, 10_000));
  let quiet = 0;
  while (quiet < 4 && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 250));
    const now = await cpuTicks(pid);
    quiet = now === last ? quiet + 1 : 0;
    last = now;
  }
}

describe('shoal ingest interrupted', () => {
  it('Ctrl-C with --json: one summary object with interrupted true and exit 130; the re-run completes the rest', async () => {
    const index = join(root, 'json');
    const first = await interruptAfterFirstCommit(args(index, true), index, 'SIGINT');
    expect(first.code, first.output).toBe(130);
    // Exactly one line on stdout, one JSON object.
    expect(first.stdout.endsWith('\n')).toBe(true);
    expect(first.stdout.trim().split('\n')).toHaveLength(1);
    const stopped = IngestJsonSummary.parse(JSON.parse(first.stdout));
    expect(stopped.interrupted).toBe(true);
    expect(stopped.documents.total).toBe(FILES);
    const { ok, unchanged, failed } = stopped.documents;
    expect(ok + unchanged + failed).toBeLessThanOrEqual(FILES);
    expect(ok + unchanged + failed, 'the run should have been stopped before its end').toBeLessThan(FILES);
    // Exactly what the index holds: each committed document is counted, nothing more.
    const atStop = await committedDocuments(index);
    expect(atStop).toBeGreaterThanOrEqual(1);
    expect(ok).toBe(atStop);
    expect(unchanged).toBe(0);
    expect(failed).toBe(0);
    expect(stopped.chunks).toBe(ok);
    expect(stopped.seconds).toBeGreaterThan(0);
    expect(first.output).toContain('interrupted (SIGINT)');

    const second = await runShoal(args(index, true));
    expect(second.code, second.stderr).toBe(0);
    const resumed = IngestJsonSummary.parse(JSON.parse(second.stdout));
    expect(resumed.interrupted).toBe(false);
    // Committed documents are skipped as unchanged; the others are indexed now: together, every file once.
    expect(resumed.documents).toEqual({ total: FILES, ok: FILES - ok, failed: 0, unchanged: ok });
    expect(resumed.documents.ok + stopped.documents.ok).toBe(FILES);
    expect(await committedDocuments(index)).toBe(FILES);
  }, 120_000);

  it('Ctrl-C while stdin records are still being written (the producer holds the pipe open): stops at once, exit 130, nothing written', async () => {
    const index = join(root, 'idx-stdin-open');
    const run = startShoal(['ingest', '-', '--no-progress', '--model', MODEL, '--index', index], {});
    run.child.stdin.write('{"id": "r1", "text": "The first record arrives; the producer is still busy with the next."}\n');
    // The record is read and the pipe stays open: once the process is idle, the read is waiting for more.
    await idle(run.child.pid ?? 0);
    const stopped = await run.stop('SIGINT');
    expect(stopped.code, run.output()).toBe(130);
    // Not the 30 s stop deadline: the read ends with the interrupt.
    expect(stopped.ms).toBeLessThan(10_000);
    expect(run.output()).toContain('interrupted (SIGINT)');
    expect(run.output()).not.toContain('took over');
    expect(await committedDocuments(index)).toBe(0);
  }, 60_000);

  it('SIGTERM without --json: the human summary says it was interrupted and how to continue; exit 143', async () => {
    const index = join(root, 'human');
    const stopped = await interruptAfterFirstCommit(args(index, false), index, 'SIGTERM');
    expect(stopped.code, stopped.output).toBe(143);
    const lines = stopped.stdout.trimEnd().split('\n');
    const ok = await committedDocuments(index);
    expect(lines[0]).toBe(`interrupted: ${FILES - ok} of ${FILES} documents not done; what finished is kept, and running the same command again continues where it stopped`);
    expect(lines[1]).toMatch(new RegExp(`^${FILES} documents: ${ok} indexed, 0 failed, 0 unchanged; ${ok} pages \\(0 OCR\\), ${ok} chunks in [\\d.]+ s → `));
  }, 120_000);
});

describe.skipIf(!natsServerAvailable())('shoal ingest --nats interrupted', () => {
  it(natsServerAvailable() ? 'Ctrl-C: the coordinator prints the summary so far with interrupted true and exits 130; the re-run completes it' : NATS_SERVER_MISSING, async () => {
    const server = await startNatsServer();
    const prefix = uniquePrefix('ingestinterrupt');
    const worker = startWorkerProcess(server.url, prefix);
    try {
      const index = join(root, 'nats');
      const env = { ...INGEST_ENV, SHOAL_SUBJECT_PREFIX: prefix };
      // The worker serves the model by name from the fixture folder.
      const command = (): string[] => args(index, true, ['--nats', server.url]).map((arg) => (arg === MODEL ? TINY_MEAN : arg));
      const first = await interruptAfterFirstCommit(command(), index, 'SIGINT', env);
      expect(first.code, first.output).toBe(130);
      expect(first.stdout.trim().split('\n')).toHaveLength(1);
      const stopped = IngestJsonSummary.parse(JSON.parse(first.stdout));
      expect(stopped.interrupted).toBe(true);
      expect(stopped.documents.ok).toBeGreaterThanOrEqual(1);
      expect(stopped.documents.ok).toBe(await committedDocuments(index));
      expect(stopped.documents.ok + stopped.documents.unchanged + stopped.documents.failed).toBeLessThan(FILES);

      const second = await runShoal(command(), { env });
      expect(second.code, second.stderr).toBe(0);
      const resumed = IngestJsonSummary.parse(JSON.parse(second.stdout));
      expect(resumed.interrupted).toBe(false);
      expect(resumed.documents).toEqual({ total: FILES, ok: FILES - stopped.documents.ok, failed: 0, unchanged: stopped.documents.ok });
    } finally {
      worker.kill('SIGTERM');
      await exited(worker);
      await server.stop();
    }
  }, 180_000);
});
