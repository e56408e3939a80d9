import { createHash } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import * as lancedb from '@lancedb/lancedb';
import { jetstream } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { IngestStatusStore, ensureIngestTopology, ingestNames } from '../../adapters/nats/ingest/ingest-store.js';
import { JobsClient, type ResolvedPartResult } from '../../adapters/nats/jobs/jobs-client.js';
import { PayloadStore } from '../../adapters/nats/connection/payloads.js';
import { ensureTopology } from '../../adapters/nats/connection/topology.js';
import { WIRE_VERSION, type JobPartResult } from '../../adapters/protocol/jobs.js';
import { natsNames } from '../../adapters/protocol/subjects.js';
import { LanceDbStore } from '../../adapters/stores/lancedb/store.js';
import { resolvePipeline } from '../../pipelines/documents/builtin.js';
import { applyOverrides } from '../../pipelines/documents/definition.js';
import { NatsIngest } from '../../pipelines/documents/nats-ingest.js';
import type { PendingSource } from '../../pipelines/documents/sources.js';
import { resolveWorkerConfig } from '../../services/worker/config.js';
import { ShoalWorker } from '../../services/worker/worker.js';
import { capturingLogger } from '../helpers/capturing-logger.js';
import { writeAnswer } from '../../adapters/nats/ingest/parse-task-standing.js';
import { newParseToken, parseTaskCheck } from '../../adapters/nats/ingest/parse-task-token.js';
import type { DocumentStatus } from '../../adapters/protocol/ingest.js';
import type { IngestSummary } from '../../pipelines/documents/runner.js';
import { eventually, natsServerAvailable, NATS_SERVER_MISSING, startNatsServer, type NatsServerHandle } from '../helpers/nats-server.js';
import { TINY_MEAN, startTestWorker, testConnection, testWorkerConfig, uniquePrefix } from '../helpers/nats-worker.js';

/**
 * Issue 42 item 12: forgeries over NATS that the threat model says are prevented.
 * - Results: messages published on a finished job's results subjects (no `Nats-Msg-Id`, another
 *   message id, a body naming another part, a part the job does not have) never change what
 *   `JobsClient.results` (what GET /v1/jobs/:id/results streams) serves; they are dropped and counted.
 * - Parse tasks: tasks pre-published under a victim's run id and document numbers, before the
 *   victim's coordinator published its own (one with the attacker's text, one that made a worker
 *   fail the document), never get the attacker's text indexed nor fail the victim's document: a
 *   worker answers only the task a document's `queued` status names (parse-task-standing.ts), by
 *   compare-and-set, and the coordinator accepts only answers to tasks it published (per-task token).
 *   Before the compare-and-set, a forged answer written just after the genuine one replaced it in
 *   the one-value-per-key bucket before the coordinator's watch read it, and the run waited for
 *   ever (the CI timeouts of this test).
 */

const encoder = new TextEncoder();
const sha256 = (bytes: Uint8Array): string => createHash('sha256').update(bytes).digest('hex');

describe.skipIf(!natsServerAvailable())(`forgery over NATS ${natsServerAvailable() ? '' : NATS_SERVER_MISSING}`, () => {
  let server: NatsServerHandle;
  let nc: NatsConnection;
  let root: string;
  const workers: ShoalWorker[] = [];

  beforeAll(async () => {
    server = await startNatsServer();
    nc = await testConnection(server.url);
    root = await mkdtemp(join(tmpdir(), 'shoal-forgery-'));
  }, 60_000);

  afterAll(async () => {
    for (const worker of workers) await worker.close();
    await nc?.close();
    await server?.stop();
    await rm(root, { recursive: true, force: true });
  }, 30_000);

  it('forged part results for a finished job never change the results served', async () => {
    const prefix = uniquePrefix('forgedresults');
    workers.push(await startTestWorker(server.url, prefix));
    const jobs = await JobsClient.open(nc, { topology: { prefix } });
    const jobId = 'finished-job';
    await jobs.submit({ job_id: jobId, primitive: 'encode', request: { model: TINY_MEAN, items: ['alpha', 'beta', 'gamma'] }, result: { kind: 'stream', vectors: 'json' }, part_items: 1 });
    const done = await jobs.wait(jobId, { timeoutMs: 60_000 });
    expect(done.state).toBe('completed');
    const read = async (): Promise<ResolvedPartResult[]> => {
      const out: ResolvedPartResult[] = [];
      for await (const part of jobs.results(jobId)) out.push(part);
      return out;
    };
    const before = await read();
    expect(before.map((part) => part.part)).toEqual([0, 1, 2]);
    const genuine = before[0] as JobPartResult;
    const forgedResult = { ...genuine, worker: 'attacker', result: { model: TINY_MEAN, items: [{ index: 0, dense: [9, 9, 9] }], usage: { items: 1, tokens: 1 } } };
    const names = natsNames(prefix);
    const js = jetstream(nc);
    const publish = (part: number, body: unknown, msgID?: string) =>
      js.publish(names.results(jobId, part), JSON.stringify(body), { expect: { streamName: names.resultsStream }, ...(msgID === undefined ? {} : { msgID }) });
    await publish(0, forgedResult); // no Nats-Msg-Id, after the job finished
    await publish(1, { ...forgedResult, part: 1 }, 'attacker-1'); // another message id
    await publish(2, { ...forgedResult, part: 0 }); // a body naming another part
    await publish(7, { ...forgedResult, part: 7, parts: 8 }); // a part the job does not have
    const after = await read();
    expect(after).toEqual(before);
    expect(after.some((part) => part.worker === 'attacker')).toBe(false);
    expect(jobs.droppedResults).toBe(3);
  }, 90_000);

  /** A parse worker whose warnings the test reads (the tasks it dropped, and why). */
  async function parseWorker(prefix: string): Promise<{ dropped: () => { doc: unknown; standing: unknown }[] }> {
    const { logger, lines } = capturingLogger();
    workers.push(await ShoalWorker.start(resolveWorkerConfig(testWorkerConfig(server.url, prefix, { parse: true })), { logger }));
    return { dropped: () => lines().filter((line) => String(line['msg']).startsWith('dropped a parse task')).map((line) => ({ doc: line['doc'], standing: line['standing'] })) };
  }

  /** The victim's run of two documents, and the attacker's two tasks published under its run id before it. */
  async function victimAndForgeries(prefix: string, index: string) {
    const topology = await ensureTopology(nc, { prefix });
    const ingest = await NatsIngest.open(nc, { prefix });
    const names = ingestNames(topology.names);
    const statuses = await IngestStatusStore.open(nc, names.bucket);
    const payloads = new PayloadStore(nc, { bucket: topology.names.payloadBucket });
    const runId = randomUUID();
    const definition = applyOverrides(await resolvePipeline(undefined), { model: TINY_MEAN, index: join(root, index) });
    const records = [
      { id: 'victim-a', text: 'The lighthouse keeper logs every passing ship in a leather book.' },
      { id: 'victim-b', text: 'Barley fields turn golden in the last week of July.' },
    ];
    const sources: PendingSource[] = records.map(({ id, text }) => ({ uri: id, load: async () => ({ source: { uri: id, id, text }, bytes: encoder.encode(text) }) }));
    // Doc 0 with the attacker's own text; doc 1 naming the victim's document id over other bytes
    // (before task-named statuses, a worker failed the victim's document for it), each with the old message id.
    const attackerText = 'ATTACKER TEXT: wire the money to account 666.';
    const attackerBytes = encoder.encode(attackerText);
    const ref = await payloads.put(`ingest/attacker/${runId}.bin`, attackerBytes);
    const { parse } = definition.stages;
    const settings = { ocr: parse.ocr, ocrModel: parse.ocrModel, ocrDpi: parse.ocrDpi, furniture: parse.furniture, maxBytes: parse.maxBytes, maxPages: parse.maxPages };
    const forged = [
      { v: WIRE_VERSION, run_id: runId, doc: 0, source: 'victim-a', id: 'victim-a', document_id: sha256(attackerBytes), ref, inline_text: true, parse: settings },
      { v: WIRE_VERSION, run_id: runId, doc: 1, source: 'victim-b', id: 'victim-b', document_id: sha256(encoder.encode(records[1]?.text ?? '')), ref, inline_text: true, parse: settings },
    ];
    const js = jetstream(nc);
    const publishForgeries = async (): Promise<void> => {
      for (const task of forged) await js.publish(names.parseSubject, JSON.stringify(task), { msgID: `${runId}.${task.doc}`, expect: { streamName: names.stream } });
    };
    const check = async (summary: IngestSummary): Promise<void> => {
      expect(summary.failed).toEqual([]);
      expect(summary.documents).toEqual({ total: 2, ok: 2, failed: 0, unchanged: 0 });
      const db = await lancedb.connect(join(root, index));
      const table = await db.openTable('chunks');
      const rows = z.array(z.object({ source: z.string(), text: z.string(), document_id: z.string() })).parse(await table.query().select(['source', 'text', 'document_id']).toArray());
      table.close();
      db.close();
      expect(rows.map((row) => row.text).join('\n')).not.toContain('ATTACKER');
      expect(rows.map((row) => [row.source, row.text]).sort()).toEqual(records.map((record) => [record.id, record.text]).sort());
      // Nothing of the attacker's was parsed (its pages would sit under the token-less name) nor dead-lettered.
      await expect(payloads.get(`obj://${topology.names.payloadBucket}/ingest/${runId}/0.pages.json`)).rejects.toThrow();
      const dlq = await topology.jsm.streams.info(topology.names.deadLetterStream, { subjects_filter: names.deadLetterSubject });
      expect(dlq.state.messages).toBe(0);
    };
    /** Runs `body` with the victim's index open, then closes it and the coordinator. */
    const withVictimIndex = async (body: (sink: LanceDbStore) => Promise<void>): Promise<void> => {
      const sink = new LanceDbStore({ dir: join(root, index) });
      try {
        await body(sink);
      } finally {
        await sink.close();
        await ingest.close();
      }
    };
    return { ingest, statuses, runId, definition, sources, publishForgeries, check, withVictimIndex };
  }

  it('parse tasks pre-published under a victim run id: the attacker text is never indexed, no victim document fails', async () => {
    const prefix = uniquePrefix('forgedparse');
    const { ingest, statuses, runId, definition, sources, publishForgeries, check, withVictimIndex } = await victimAndForgeries(prefix, 'victim');
    await publishForgeries();
    await withVictimIndex(async (sink) => {
      const running = ingest.run({ runId, definition, sink, index: 'victim' }, sources);
      running.catch(() => undefined);
      // The victim's tasks are published (its documents queued) behind the attacker's before any parse worker runs.
      await eventually(async () => {
        for (const doc of [0, 1]) expect((await statuses.document(runId, doc))?.state).toBe('queued');
      }, 30_000);
      const worker = await parseWorker(prefix);
      await check(await running);
      // The worker took the attacker's tasks first and answered neither: each document's status names the victim's task.
      expect(worker.dropped().sort((a, b) => Number(a.doc) - Number(b.doc))).toEqual([
        { doc: 0, standing: 'foreign' },
        { doc: 1, standing: 'foreign' },
      ]);
    });
  }, 90_000);

  it('parse tasks published under a run id before its run exists are dropped, and the run then completes', async () => {
    const prefix = uniquePrefix('forgedearly');
    const { ingest, runId, definition, sources, publishForgeries, check, withVictimIndex } = await victimAndForgeries(prefix, 'early');
    const worker = await parseWorker(prefix);
    await publishForgeries();
    await eventually(async () => expect(worker.dropped()).toHaveLength(2), 30_000);
    expect(worker.dropped().map((drop) => drop.standing)).toEqual(['unqueued', 'unqueued']);
    await withVictimIndex(async (sink) => check(await ingest.run({ runId, definition, sink, index: 'early' }, sources)));
  }, 90_000);

  it('an answer is written only over the queued status of its own task (compare-and-set)', async () => {
    const prefix = uniquePrefix('answercas');
    const topology = await ensureTopology(nc, { prefix });
    const names = await ensureIngestTopology(nc, topology);
    const store = await IngestStatusStore.open(nc, names.bucket);
    const runId = randomUUID();
    const documentId = sha256(encoder.encode('genuine'));
    const token = newParseToken();
    const genuine = { run_id: runId, doc: 0, token, document_id: documentId };
    const status = (state: 'queued' | 'parsed' | 'failed', task: string | undefined): DocumentStatus => ({
      v: WIRE_VERSION,
      run_id: runId,
      doc: 0,
      source: 'a',
      document_id: documentId,
      state,
      ...(task === undefined ? {} : { task }),
      updated_at: new Date().toISOString(),
    });
    const check = parseTaskCheck({ token }) ?? '';
    const forgedAnswer = status('failed', undefined);
    expect(await writeAnswer(store, { run_id: runId, doc: 0, document_id: documentId }, forgedAnswer)).toBe('unqueued');
    await store.putDocument(status('queued', check));
    // Another token, or none, with the victim's document id: the status names another task.
    expect(await writeAnswer(store, { run_id: runId, doc: 0, document_id: documentId }, forgedAnswer)).toBe('foreign');
    expect(await writeAnswer(store, { ...genuine, token: newParseToken() }, forgedAnswer)).toBe('foreign');
    expect((await store.document(runId, 0))?.state).toBe('queued');
    expect(await writeAnswer(store, genuine, status('parsed', check))).toBe('written');
    // A redelivered copy of the same task finds it answered and writes nothing.
    expect(await writeAnswer(store, genuine, status('failed', check))).toBe('answered');
    expect(await store.document(runId, 0)).toMatchObject({ state: 'parsed', task: check });
    // A coordinator older than task-named statuses (queued without a task) is still answered.
    await store.putDocument(status('queued', undefined));
    expect(await writeAnswer(store, genuine, status('parsed', check))).toBe('written');
  }, 30_000);
});
