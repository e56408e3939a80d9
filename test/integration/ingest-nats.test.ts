import type { ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureIngestTopology, IngestStatusStore } from '../../adapters/nats/ingest/ingest-store.js';
import { ensureTopology } from '../../adapters/nats/connection/topology.js';
import type { DocumentStatus } from '../../adapters/protocol/ingest.js';
import { natsServerAvailable, NATS_SERVER_MISSING, startNatsServer, type NatsServerHandle } from '../helpers/nats-server.js';
import { TINY_MEAN, testConnection, uniquePrefix } from '../helpers/nats-worker.js';
import { REPO_ROOT, DATA_DIR } from '../helpers/shared.js';
import { runShoal } from '../helpers/shoal-cli.js';
import { summaryOf } from '../helpers/ingest-summary.js';
import { expectSameRows, INGEST_ENV as ENV, readRows, startWorkerProcess, stopWorkerProcess } from '../helpers/ingest-nats.js';

/**
 * `shoal ingest --nats` end to end: a private nats-server, one real `shoal worker --parse`
 * process (it parses, OCRs the scanned sample page and encodes), and the CLI as coordinator. The
 * same sources (the README's sample folder, a text PDF and the encrypted PDF of the shared kit)
 * ingested in process and over NATS must give the same rows: ids, texts, pages, vectors within
 * 1e-5, and the same failure. Per-document and per-run status are read back from the KV bucket.
 */

const PDFS = join(DATA_DIR, 'pdfs');
const SOURCES = [join(REPO_ROOT, 'examples', 'docs'), join(PDFS, '001-trivial__minimal-document.pdf'), join(PDFS, '005-libreoffice-writer-password__libreoffice-writer-password.pdf')];


describe.skipIf(!natsServerAvailable())('shoal ingest --nats', () => {
  let server: NatsServerHandle;
  let worker: ChildProcess;
  let root: string;
  const prefix = uniquePrefix('ingestnats');

  beforeAll(async () => {
    server = await startNatsServer();
    root = await mkdtemp(join(tmpdir(), 'shoal-ingest-nats-'));
    worker = startWorkerProcess(server.url, prefix);
  }, 30_000);

  afterAll(async () => {
    await stopWorkerProcess(worker);
    await server?.stop();
    await rm(root, { recursive: true, force: true });
  }, 30_000);

  it(natsServerAvailable() ? 'gives the rows of an in-process run (ids, texts, pages, vectors within 1e-5), with per-document status in KV' : NATS_SERVER_MISSING, async () => {
    const localIndex = join(root, 'local');
    const natsIndex = join(root, 'nats');
    const args = (index: string): string[] => ['ingest', ...SOURCES, '--no-progress', '--model', TINY_MEAN, '--index', index, '--json'];
    const [local, remote] = await Promise.all([
      runShoal(args(localIndex), { env: ENV }),
      runShoal([...args(natsIndex), '--nats', server.url], { env: { ...ENV, SHOAL_SUBJECT_PREFIX: prefix } }),
    ]);
    expect(local.code, local.stderr).toBe(3);
    expect(remote.code, remote.stderr).toBe(3);
    const localSummary = summaryOf(local.stdout);
    const remoteSummary = summaryOf(remote.stdout);
    expect(remoteSummary.documents).toEqual({ total: 6, ok: 5, failed: 1, unchanged: 0 });
    expect(remoteSummary).toMatchObject({ documents: localSummary.documents, pages: localSummary.pages, ocr_pages: 1, chunks: localSummary.chunks });
    expect(remoteSummary.failed.map(({ source, code }) => ({ source, code }))).toEqual([{ source: SOURCES[2], code: 'DOCUMENT_ENCRYPTED' }]);

    const localRows = await readRows(localIndex);
    expect(localRows.length).toBe(localSummary.chunks);
    expectSameRows(localRows, await readRows(natsIndex));

    // The run's id is on stderr; its documents' statuses and its own are in the ingest bucket.
    const runId = /ingest run ([0-9a-f-]{36})/.exec(remote.stderr)?.[1] ?? '';
    expect(runId).not.toBe('');
    const nc = await testConnection(server.url);
    try {
      const names = await ensureIngestTopology(nc, await ensureTopology(nc, { prefix }));
      const store = await IngestStatusStore.open(nc, names.bucket);
      const run = await store.run(runId);
      expect(run).toMatchObject({ kind: 'ingest', state: 'partial', documents: { total: 6, ok: 5, failed: 1, unchanged: 0 }, chunks: localSummary.chunks });
      const statuses: DocumentStatus[] = [];
      for (let doc = 0; doc < 6; doc++) {
        const status = await store.document(runId, doc);
        if (status !== null) statuses.push(status);
      }
      expect(statuses.map((s) => s.state).sort()).toEqual(['committed', 'committed', 'committed', 'committed', 'committed', 'failed']);
      expect(statuses.find((s) => s.state === 'failed')).toMatchObject({ source: SOURCES[2], code: 'DOCUMENT_ENCRYPTED' });
      const bySource = new Map(statuses.map((s) => [s.source, s]));
      const scanned = bySource.get(join(SOURCES[0] ?? '', 'notice-14-dredging-scan.pdf'));
      expect(scanned?.chunks).toBe(localRows.filter((row) => row.source.endsWith('notice-14-dredging-scan.pdf')).length);
    } finally {
      await nc.close();
    }

    // A re-run over NATS finds everything unchanged and writes nothing.
    const again = await runShoal([...args(natsIndex), '--nats', server.url], { env: { ...ENV, SHOAL_SUBJECT_PREFIX: prefix } });
    expect(summaryOf(again.stdout).documents).toEqual({ total: 6, ok: 0, failed: 1, unchanged: 5 });
    expectSameRows(localRows, await readRows(natsIndex));
  }, 180_000);

  it('an unreachable server fails at once with UNAVAILABLE (exit 1)', async () => {
    const run = await runShoal(['ingest', SOURCES[1] ?? '', '--no-progress', '--model', TINY_MEAN, '--index', join(root, 'unused'), '--nats', 'nats://127.0.0.1:1'], { env: ENV });
    expect(run.code).toBe(1);
    expect(run.stderr).toContain('[UNAVAILABLE]');
  }, 60_000);
});
