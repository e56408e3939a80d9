import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jetstream, type JsMsg } from '@nats-io/jetstream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ensureIngestTopology, IngestStatusStore } from '../../adapters/nats/ingest/ingest-store.js';
import { ParseTaskClient } from '../../adapters/nats/ingest/parse-client.js';
import { PayloadStore } from '../../adapters/nats/connection/payloads.js';
import { ensureTopology } from '../../adapters/nats/connection/topology.js';
import { DEAD_LETTER_HEADERS } from '../../adapters/protocol/jobs.js';
import { natsNames } from '../../adapters/protocol/subjects.js';
import { eventually, natsServerAvailable, NATS_SERVER_MISSING, startNatsServer, type NatsServerHandle } from '../helpers/nats-server.js';
import { TINY_MEAN, testConnection, uniquePrefix } from '../helpers/nats-worker.js';
import { exited, INGEST_ENV, startWorkerProcess } from '../helpers/ingest-nats.js';
import { runShoal, SHOAL_BIN } from '../helpers/shoal-cli.js';
import { CLI_FROM_SOURCE } from '../helpers/cli-build.js';

/**
 * The operational edges of `shoal ingest --nats` against a private nats-server and real
 * processes: a run with no parse worker warns after a few seconds and fails after
 * SHOAL_PARSE_WORKER_TIMEOUT_MS; a parse task that can never succeed (its object vanished) is
 * dead-lettered and its document failed with READ_FAILED, so the run ends with exit 3; a task
 * that every worker took and never acked (they crashed) is dead-lettered by the coordinator's
 * max-deliveries handler and its document failed with TIMEOUT.
 */

const WARNING = 'warning: no worker runs the parse role: start `shoal worker --parse`';
const Summary = z.looseObject({
  documents: z.object({ total: z.number(), ok: z.number(), failed: z.number(), unchanged: z.number() }),
  failed: z.array(z.object({ source: z.string(), code: z.string(), reason: z.string() })),
});

describe.skipIf(!natsServerAvailable())(`shoal ingest --nats, operations ${natsServerAvailable() ? '' : NATS_SERVER_MISSING}`, () => {
  let server: NatsServerHandle;
  let root: string;
  let worker: ChildProcess | null = null;
  let first: string;
  let second: string;

  beforeAll(async () => {
    server = await startNatsServer();
    root = await mkdtemp(join(tmpdir(), 'shoal-ingest-ops-'));
    first = join(root, 'a-notes.md');
    second = join(root, 'b-log.txt');
    await writeFile(first, '# Harbour notes\n\nThe pilot boat leaves at dawn and returns before the tide turns.\n');
    await writeFile(second, 'Dredging of the north channel starts on Monday; vessels keep to the buoyed fairway.\n');
  }, 30_000);

  afterAll(async () => {
    if (worker !== null && worker.exitCode === null) {
      worker.kill('SIGTERM');
      await exited(worker);
    }
    await server?.stop();
    await rm(root, { recursive: true, force: true });
  }, 30_000);

  it('with no parse worker: warns after a few seconds, then fails with UNAVAILABLE (exit 1) after SHOAL_PARSE_WORKER_TIMEOUT_MS', async () => {
    const prefix = uniquePrefix('opsidle');
    const started = performance.now();
    const run = await runShoal(['ingest', first, '--no-progress', '--model', TINY_MEAN, '--index', join(root, 'idle'), '--json', '--nats', server.url], {
      env: { ...INGEST_ENV, SHOAL_SUBJECT_PREFIX: prefix, SHOAL_PARSE_WORKER_TIMEOUT_MS: '8000' },
    });
    const seconds = (performance.now() - started) / 1000;
    expect(run.code, run.stderr).toBe(1);
    expect(run.stderr).toContain(WARNING);
    expect(run.stderr).toMatch(/error \[UNAVAILABLE\]: no worker runs the parse role.*SHOAL_PARSE_WORKER_TIMEOUT_MS=8000/);
    // The warning comes before the failure, and the run gave up at the timeout, not at once.
    expect(run.stderr.indexOf(WARNING)).toBeLessThan(run.stderr.indexOf('[UNAVAILABLE]'));
    expect(seconds).toBeGreaterThan(8);
    expect(seconds).toBeLessThan(40);

    const runId = /ingest run ([0-9a-f-]{36})/.exec(run.stderr)?.[1] ?? '';
    const nc = await testConnection(server.url);
    try {
      const names = await ensureIngestTopology(nc, await ensureTopology(nc, { prefix }));
      const status = await (await IngestStatusStore.open(nc, names.bucket)).run(runId);
      expect(status).toMatchObject({ state: 'failed', error: { code: 'UNAVAILABLE' } });
    } finally {
      await nc.close();
    }
  }, 60_000);

  // Each topology reserves its streams' bytes on the server: the last two tests share one.
  const sharedPrefix = uniquePrefix('opspoison');

  it('a task whose object vanished is dead-lettered, its document failed (READ_FAILED), and the run ends with exit 3', async () => {
    const prefix = sharedPrefix;
    const child = spawn(process.execPath, [SHOAL_BIN, 'ingest', first, second, '--no-progress', '--model', TINY_MEAN, '--index', join(root, 'poison'), '--json', '--nats', server.url], {
      cwd: tmpdir(),
      env: { ...process.env, ...INGEST_ENV, SHOAL_FROM_SOURCE: CLI_FROM_SOURCE, SHOAL_THREADS: '1', SHOAL_SUBJECT_PREFIX: prefix },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
    const done = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));

    // No worker yet: the documents wait queued and the coordinator says why.
    await eventually(async () => expect(stderr).toContain(WARNING), 30_000);
    const runId = /ingest run ([0-9a-f-]{36})/.exec(stderr)?.[1] ?? '';
    const nc = await testConnection(server.url);
    try {
      const topology = await ensureTopology(nc, { prefix });
      const names = await ensureIngestTopology(nc, topology);
      const store = await IngestStatusStore.open(nc, names.bucket);
      const statuses = await Promise.all([store.document(runId, 0), store.document(runId, 1)]);
      expect(statuses.map((s) => s?.state)).toEqual(['queued', 'queued']);
      const poisoned = statuses.find((s) => s?.source === first);
      expect(poisoned).toBeDefined();
      // The task's object disappears (expired, deleted): the task can never succeed.
      const payloads = new PayloadStore(nc, { bucket: natsNames(prefix).payloadBucket });
      await payloads.remove(`obj://${payloads.bucket}/ingest/${runId}/${poisoned?.doc ?? -1}.bin`);

      worker = startWorkerProcess(server.url, prefix);
      const code = await done;
      expect(code, stderr).toBe(3);
      const summary = Summary.parse(JSON.parse(stdout.trim().split('\n').at(-1) ?? '{}'));
      expect(summary.documents).toEqual({ total: 2, ok: 1, failed: 1, unchanged: 0 });
      expect(summary.failed.map(({ source, code: failed }) => ({ source, code: failed }))).toEqual([{ source: first, code: 'READ_FAILED' }]);
      expect(summary.failed[0]?.reason).toMatch(/does not exist.*dead-lettered/);

      const failed = await store.document(runId, poisoned?.doc ?? -1);
      expect(failed).toMatchObject({ state: 'failed', code: 'READ_FAILED', source: first });
      const dead = await topology.jsm.streams.getMessage(names.deadLetterStream, { last_by_subj: names.deadLetterSubject });
      expect(dead?.header.get(DEAD_LETTER_HEADERS.code)).toBe('INVALID_INPUT');
      expect(dead?.header.get(DEAD_LETTER_HEADERS.subject)).toBe(names.parseSubject);
      expect(dead?.header.get(DEAD_LETTER_HEADERS.reason)).toMatch(/does not exist/);
      expect(dead?.json()).toMatchObject({ run_id: runId, doc: poisoned?.doc, source: first });
    } finally {
      await nc.close();
      // The next test plays the (crashing) worker on this topology itself.
      worker?.kill('SIGTERM');
      if (worker !== null) await exited(worker);
    }
  }, 90_000);

  it('a task nobody acks within max_deliver (its workers crash) is dead-lettered by the coordinator and its document failed (TIMEOUT)', async () => {
    const prefix = sharedPrefix;
    const nc = await testConnection(server.url);
    try {
      const topology = await ensureTopology(nc, { prefix });
      // The consumer as parse workers configure it: 1 s ack wait, 2 deliveries.
      const names = await ensureIngestTopology(nc, topology, { ackWaitMs: 1_000, maxDeliver: 2 });
      const client = await ParseTaskClient.open(nc, topology);
      client.deadLetters.start();
      try {
        const bytes = new TextEncoder().encode('a document that crashes every worker');
        const documentId = createHash('sha256').update(bytes).digest('hex');
        const parse = { ocr: 'auto', ocrModel: 'paddleocr/pp-ocrv4', ocrDpi: 150, maxBytes: 1_000_000, maxPages: 100 } as const;
        await client.submit({ run_id: 'crashrun', doc: 0, source: 'crash.txt', document_id: documentId, parse }, bytes);

        // This test is the worker that takes the task and dies (never acks), twice.
        const consumer = await jetstream(nc).consumers.get(names.stream, names.parseConsumer);
        const deliveries: JsMsg[] = [];
        while (deliveries.length < 2) {
          for await (const msg of await consumer.fetch({ max_messages: 1, expires: 5_000 })) deliveries.push(msg);
        }
        expect(deliveries.map((m) => m.info.deliveryCount)).toEqual([1, 2]);
        // The server raises the advisory on the pull that would deliver a third time.
        const third: JsMsg[] = [];
        for await (const msg of await consumer.fetch({ max_messages: 1, expires: 2_500 })) third.push(msg);
        expect(third).toEqual([]);

        await eventually(async () => {
          expect(await client.status.document('crashrun', 0)).toMatchObject({ state: 'failed', code: 'TIMEOUT', source: 'crash.txt' });
        }, 20_000);
        const dead = await topology.jsm.streams.getMessage(names.deadLetterStream, { last_by_subj: names.deadLetterSubject });
        expect(dead?.header.get(DEAD_LETTER_HEADERS.deliveries)).toBe('2');
        expect(dead?.header.get(DEAD_LETTER_HEADERS.sequence)).toBe(String(deliveries[0]?.seq));
        expect(dead?.header.get(DEAD_LETTER_HEADERS.reason)).toMatch(/without an ack/);
        expect(dead?.json()).toMatchObject({ run_id: 'crashrun', doc: 0 });
        // Out of the work queue.
        await eventually(async () => expect((await topology.jsm.streams.info(names.stream)).state.messages).toBe(0));
      } finally {
        await client.deadLetters.close();
      }
    } finally {
      await nc.close();
    }
  }, 60_000);
});
