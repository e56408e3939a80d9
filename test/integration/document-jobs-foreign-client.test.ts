import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DocumentEvent, RunEvent } from '../../adapters/protocol/documents.js';
import type { ShoalWorker } from '../../services/worker/worker.js';
import { natsServerAvailable, NATS_SERVER_MISSING, startNatsServer, type NatsServerHandle } from '../helpers/nats-server.js';
import { FIXTURE_MODELS_DIR, TINY_MEAN, startTestWorker } from '../helpers/nats-worker.js';
import { REPO_ROOT } from '../helpers/shared.js';
import { runShoal } from '../helpers/shoal-cli.js';
import { readRows } from '../helpers/ingest-nats.js';

/**
 * Issue 35's foreign client: a script that imports only @nats-io/transport-node and
 * @nats-io/jetstream and writes the JSON of docs/nats.md (test/fixtures/foreign/document-jobs.mjs)
 * publishes 50 document jobs and the run's announcement while **no worker runs**; then a model
 * worker and a documents worker start, the script receives 50 terminal events and the run's end
 * event from the events stream, and `shoal search` finds the rows.
 */

const SCRIPT = join(REPO_ROOT, 'test', 'fixtures', 'foreign', 'document-jobs.mjs');
const COUNT = 50;

function node(args: readonly string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [SCRIPT, ...args], { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (chunk: Buffer) => out.push(chunk));
    child.stderr.on('data', (chunk: Buffer) => err.push(chunk));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout: Buffer.concat(out).toString('utf8'), stderr: Buffer.concat(err).toString('utf8') }));
  });
}

describe.skipIf(!natsServerAvailable())('document jobs from a foreign client', () => {
  let server: NatsServerHandle;
  let root: string;
  const workers: ShoalWorker[] = [];

  beforeAll(async () => {
    server = await startNatsServer();
    root = await mkdtemp(join(tmpdir(), 'shoal-foreign-'));
  }, 30_000);

  afterAll(async () => {
    await Promise.all(workers.map((worker) => worker.close().catch(() => undefined)));
    await server?.stop();
    await rm(root, { recursive: true, force: true });
  }, 30_000);

  it(natsServerAvailable() ? 'publishes 50 jobs with no worker running, then receives 50 terminal events and finds the rows' : NATS_SERVER_MISSING, async () => {
    const pipelines = join(root, 'pipelines');
    const index = join(root, 'index');
    await mkdir(pipelines);
    await writeFile(join(pipelines, 'tiny.yaml'), `name: tiny\nstages:\n  encode:\n    model: ${TINY_MEAN}\n`);

    const published = await node(['publish', server.url, 'foreign-run-1', String(COUNT), 'tiny', 'docs']);
    expect(published.stderr).toBe('');
    expect(published.code).toBe(0);

    workers.push(await startTestWorker(server.url, 'shoal'));
    workers.push(await startTestWorker(server.url, 'shoal', { models: [], documents: true, documentPipelines: ['tiny'], pipelinesDir: pipelines, indexes: { docs: index }, consumer: { ackWaitMs: 10_000, maxDeliver: 5 } }));

    const watched = await node(['watch', server.url, 'foreign-run-1', String(COUNT)]);
    expect(watched.code).toBe(0);
    const { events, run } = JSON.parse(watched.stdout) as { events: unknown[]; run: unknown };
    const parsed = events.map((event) => DocumentEvent.parse(event));
    // Exactly one stored event per document, each committed, with its metadata echoed.
    expect(parsed).toHaveLength(COUNT);
    expect(new Set(parsed.map((event) => event.doc)).size).toBe(COUNT);
    expect(parsed.every((event) => event.state === 'committed' && event.chunks === 1 && event.pages === 1 && event.document_id !== null)).toBe(true);
    expect(parsed.find((event) => event.doc === 'doc-7')?.metadata).toEqual({ n: 7 });
    expect(RunEvent.parse(run)).toMatchObject({ run_id: 'foreign-run-1', state: 'completed', documents: { total: COUNT, ok: COUNT, failed: 0, unchanged: 0 }, chunks: COUNT });

    const rows = await readRows(index);
    expect(rows).toHaveLength(COUNT);
    expect(new Set(rows.map((row) => row.source))).toEqual(new Set(Array.from({ length: COUNT }, (_, n) => `foreign/doc-${n}`)));

    const search = await runShoal(['search', 'glaciers carve valleys', '--index', index, '--k', '3'], { env: { SHOAL_MODEL_DIR: FIXTURE_MODELS_DIR } });
    expect(search.code).toBe(0);
    const hits = search.stdout.trim().split('\n').map((line) => JSON.parse(line) as { source: string; text: string });
    expect(hits).toHaveLength(3);
    expect(hits.every((hit) => hit.source.startsWith('foreign/doc-'))).toBe(true);

    // A job's metadata is stored with its rows too: returned with each hit and filterable.
    const seven = await runShoal(['search', 'glaciers carve valleys', '--index', index, '--k', '10', '--filter', 'metadata.n = 7'], { env: { SHOAL_MODEL_DIR: FIXTURE_MODELS_DIR } });
    expect(seven.code, seven.stderr).toBe(0);
    expect(seven.stdout.trim().split('\n').map((line) => JSON.parse(line) as { source: string; metadata: unknown })).toEqual([expect.objectContaining({ source: 'foreign/doc-7', metadata: { n: 7 } })]);
  }, 180_000);
});
