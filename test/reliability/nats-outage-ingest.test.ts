import { spawn, type ChildProcess } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as lancedb from '@lancedb/lancedb';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ensureIngestTopology, IngestStatusStore } from '../../adapters/nats/ingest/ingest-store.js';
import { ensureTopology } from '../../adapters/nats/connection/topology.js';
import { CLI_FROM_SOURCE } from '../helpers/cli-build.js';
import { exited, INGEST_ENV, startWorkerProcess } from '../helpers/ingest-nats.js';
import { natsServerAvailable, NATS_SERVER_MISSING, startNatsServer, type NatsServerHandle } from '../helpers/nats-server.js';
import { TINY_MEAN, testConnection, uniquePrefix } from '../helpers/nats-worker.js';
import { SHOAL_BIN } from '../helpers/shoal-cli.js';

/**
 * Issue 42 item 8: a brief NATS outage must not fail documents. `shoal ingest --nats` (a real
 * process) ingests 80 small documents with a real `shoal worker --parse` process; once the first
 * documents are committed, nats-server is stopped for 4 s and started again on the same port and
 * store (a broker restart). Every NATS call of the coordinator that fails transiently (timed out,
 * connection lost, no responders) is retried with backoff within a bound, as store outages are:
 * the run must exit 0 with no document failed and every document's rows in the index.
 */

const DOCUMENTS = 80;
const OUTAGE_MS = 4_000;

const Summary = z.object({
  documents: z.object({ total: z.number(), ok: z.number(), failed: z.number(), unchanged: z.number() }),
  failed: z.array(z.object({ source: z.string(), code: z.string(), reason: z.string() })),
});

async function until<T>(what: string, timeoutMs: number, check: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check().catch(() => undefined);
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe.skipIf(!natsServerAvailable())(`ingest over NATS through a broker restart ${natsServerAvailable() ? '' : NATS_SERVER_MISSING}`, () => {
  let nats: NatsServerHandle;
  let worker: ChildProcess;
  let nc: NatsConnection;
  let statuses: IngestStatusStore;
  let root: string;
  const prefix = uniquePrefix('natsoutage');

  beforeAll(async () => {
    nats = await startNatsServer();
    worker = startWorkerProcess(nats.url, prefix);
    root = await mkdtemp(join(tmpdir(), 'shoal-nats-outage-'));
    await mkdir(join(root, 'docs'));
    for (let i = 0; i < DOCUMENTS; i++) {
      const n = String(i).padStart(3, '0');
      await writeFile(join(root, 'docs', `note-${n}.txt`), `Note ${n}. The ferry to island ${i} leaves at ${i % 12} o'clock.\n\nPassengers for island ${i} wait on pier ${i % 5} with their bicycles and bags.\n`);
    }
    await writeFile(join(root, 'small.yaml'), 'name: small\nstages:\n  chunk: {size: 32, overlap: 4}\n  write: {batchRows: 8}\n');
    nc = await testConnection(nats.url);
    const topology = await ensureTopology(nc, { prefix });
    statuses = await IngestStatusStore.open(nc, (await ensureIngestTopology(nc, topology)).bucket);
  }, 60_000);

  afterAll(async () => {
    worker?.kill('SIGTERM');
    if (worker !== undefined) await exited(worker);
    await nc?.close();
    await nats?.stop();
    if (root !== undefined) await rm(root, { recursive: true, force: true });
  }, 30_000);

  it(`nats-server down ${OUTAGE_MS / 1000} s mid-run: 0 documents failed, every document indexed`, async () => {
    const index = join(root, 'index');
    const child = spawn(process.execPath, [SHOAL_BIN, 'ingest', join(root, 'docs'), '--nats', nats.url, '--model', TINY_MEAN, '--pipeline', join(root, 'small.yaml'), '--index', index, '--json', '--no-progress'], {
      cwd: tmpdir(),
      env: { ...process.env, ...INGEST_ENV, SHOAL_FROM_SOURCE: CLI_FROM_SOURCE, SHOAL_SUBJECT_PREFIX: prefix, SHOAL_THREADS: '1' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout?.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
    const runId = new Promise<string>((resolve) =>
      child.stderr?.on('data', (chunk: Buffer) => {
        stderr += chunk.toString('utf8');
        const id = /ingest run ([0-9a-f-]{36})/.exec(stderr)?.[1];
        if (id !== undefined) resolve(id);
      }),
    );
    const done = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
    try {
      const id = await runId;
      const first = await until('the first committed documents', 60_000, async () => {
        const status = await statuses.run(id);
        return status !== null && status.documents.ok > 0 ? status : undefined;
      });
      expect(first.documents.ok, 'the outage must come mid-run').toBeLessThan(DOCUMENTS);
      await nats.halt();
      await new Promise((resolve) => setTimeout(resolve, OUTAGE_MS));
      await nats.start();
      const code = await done;
      expect(code, `${stderr}\n${stdout.slice(0, 3000)}`).toBe(0);
      const summary = Summary.parse(JSON.parse(stdout));
      expect(summary.failed).toEqual([]);
      expect(summary.documents).toEqual({ total: DOCUMENTS, ok: DOCUMENTS, failed: 0, unchanged: 0 });
      const db = await lancedb.connect(index);
      const table = await db.openTable('chunks');
      const rows = z.array(z.object({ id: z.string(), source: z.string() })).parse(await table.query().select(['id', 'source']).toArray());
      table.close();
      db.close();
      expect(new Set(rows.map((row) => row.source)).size).toBe(DOCUMENTS);
      expect(new Set(rows.map((row) => row.id)).size).toBe(rows.length);
      await until('the run status completed', 10_000, async () => ((await statuses.run(id))?.state === 'completed' ? true : undefined));
    } finally {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    }
  }, 60_000);
});
