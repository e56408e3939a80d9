import { cpSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jetstream } from '@nats-io/jetstream';
import { headers as natsHeaders, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JobsClient } from '../../adapters/nats/jobs/jobs-client.js';
import { REQUEUE_HEADERS } from '../../adapters/nats/jobs/requeue.js';
import { DEAD_LETTER_HEADERS, WIRE_VERSION } from '../../adapters/protocol/jobs.js';
import { EncodeResult } from '../../adapters/protocol/results.js';
import type { Primitive } from '../../adapters/protocol/subjects.js';
import type { ShoalWorker } from '../../services/worker/worker.js';
import { NATS_SERVER_MISSING, eventually, natsServerAvailable, startNatsServer, type NatsServerHandle } from '../helpers/nats-server.js';
import { FIXTURE_MODELS_DIR, TINY_MEAN, startTestWorker, testConnection, uniquePrefix } from '../helpers/nats-worker.js';

/**
 * Shutdowns do not use up a part's deliveries (the audit's scenario): with max_deliver 2, workers
 * stopped with a drain deadline shorter than their part (in-flight work aborted) twice or more,
 * then a normal worker, and the job completes with every item once and no dead letter. The
 * interrupted part is handed back as a fresh copy (part-handler.ts, requeue.ts). A part that
 * really fails is still dead-lettered after max_deliver, counting the deliveries of earlier copies.
 */

const BROKEN = 'broken-mean';
const MAX_DELIVER = 2;

function items(count: number): { id: number; text: string }[] {
  return Array.from({ length: count }, (_, i) => ({ id: i, text: `item ${i}: ${i % 3 === 0 ? 'a red fox jumps over the lazy dog' : 'the blue sky above the quiet harbour'}` }));
}

describe.skipIf(!natsServerAvailable())(`NATS parts interrupted by shutdown ${natsServerAvailable() ? '' : NATS_SERVER_MISSING}`, () => {
  let server: NatsServerHandle;
  let nc: NatsConnection;
  let jobs: JobsClient;
  const prefix = uniquePrefix('requeue');
  const modelDir = mkdtempSync(join(tmpdir(), 'shoal-broken-'));

  beforeAll(async () => {
    cpSync(join(FIXTURE_MODELS_DIR, TINY_MEAN), join(modelDir, BROKEN), { recursive: true });
    writeFileSync(join(modelDir, BROKEN, 'onnx', 'model.onnx'), 'this is not an ONNX graph');
    server = await startNatsServer();
    nc = await testConnection(server.url);
    jobs = await JobsClient.open(nc, { topology: { prefix }, consumer: { ackWaitMs: 30_000, maxDeliver: MAX_DELIVER } });
  });

  afterAll(async () => {
    await nc?.close();
    await server?.stop();
    rmSync(modelDir, { recursive: true, force: true });
  });

  const consumerInfo = (primitive: Primitive, model: string) => jobs.topology.jsm.consumers.info(jobs.topology.names.jobsStream, jobs.topology.names.consumer(primitive, model));
  const jobsStream = () => jobs.topology.jsm.streams.info(jobs.topology.names.jobsStream);

  /**
   * `shoal worker --concurrency 1 --max-deliver 2` stopped while a part is in flight, its drain
   * deadline (1 ms) passing before the part can finish: the part is aborted. Resolves with the
   * jobs stream's last sequence before and after (a part handed back is a new message).
   */
  async function interruptOnce(id: string): Promise<{ before: number; after: number }> {
    const before = (await jobsStream()).state.last_seq;
    const worker = await startTestWorker(server.url, prefix, { workerId: id, concurrency: 1, consumer: { ackWaitMs: 30_000, maxDeliver: MAX_DELIVER }, drainTimeoutMs: 1 });
    await eventually(async () => expect((await consumerInfo('encode', TINY_MEAN)).num_ack_pending).toBe(1), 30_000);
    await worker.drain();
    expect(worker.state).toBe('stopped');
    const info = await consumerInfo('encode', TINY_MEAN);
    // Nothing is left held by the stopped worker, nor waiting for a redelivery.
    expect(info.num_ack_pending).toBe(0);
    return { before, after: (await jobsStream()).state.last_seq };
  }

  async function finish(id: string, jobId: string): Promise<void> {
    const worker: ShoalWorker = await startTestWorker(server.url, prefix, { workerId: id, concurrency: 1, consumer: { ackWaitMs: 30_000, maxDeliver: MAX_DELIVER } });
    try {
      await jobs.wait(jobId, { timeoutMs: 60_000 });
    } finally {
      await worker.drain();
    }
  }

  async function expectEveryItemOnce(jobId: string, parts: number, count: number): Promise<void> {
    const { jsm, names } = jobs.topology;
    const results = await jsm.streams.info(names.resultsStream, { subjects_filter: names.jobResults(jobId) });
    const perPart = Object.values(results.state.subjects ?? {});
    expect(perPart).toHaveLength(parts);
    expect(perPart.every((n) => n === 1)).toBe(true);
    const indexes: number[] = [];
    for await (const part of jobs.results(jobId)) indexes.push(...EncodeResult.parse(part.result).items.map((item) => item.index));
    expect(indexes).toEqual(Array.from({ length: count }, (_, i) => i));
  }

  async function deadLetterCount(): Promise<number> {
    return (await jobs.topology.jsm.streams.info(jobs.topology.names.deadLetterStream)).state.messages;
  }

  it('a job whose parts were interrupted by two drains past their deadline completes, every item once, nothing dead-lettered', async () => {
    const ITEMS = items(1_200);
    const submitted = await jobs.submit({ job_id: 'audit', primitive: 'encode', request: { model: TINY_MEAN, items: ITEMS }, part_items: 400 });
    expect(submitted.parts).toBe(3);
    for (const id of ['stopped-1', 'stopped-2']) {
      const { before, after } = await interruptOnce(id);
      // The aborted part went back to the queue as a fresh message (a nak would add none).
      expect(after).toBe(before + 1);
    }
    expect((await jobs.status('audit'))?.parts_done).toBeLessThan(3);
    await finish('finisher-1', 'audit');
    expect(await jobs.status('audit')).toMatchObject({ state: 'completed', parts_done: 3, parts_failed: 0, errors: [] });
    await expectEveryItemOnce('audit', 3, ITEMS.length);
    expect(await deadLetterCount()).toBe(0);
    const left = await consumerInfo('encode', TINY_MEAN);
    expect(left.num_pending + left.num_ack_pending).toBe(0);
  });

  it('one part interrupted more times than max_deliver is handed back each time and completes', async () => {
    const ITEMS = items(400);
    await jobs.submit({ job_id: 'single', primitive: 'encode', request: { model: TINY_MEAN, items: ITEMS }, part_items: 400 });
    for (const id of ['again-1', 'again-2', 'again-3']) {
      const { before, after } = await interruptOnce(id);
      expect(after).toBe(before + 1);
    }
    const { jsm, names } = jobs.topology;
    const copy = await jsm.streams.getMessage(names.jobsStream, { last_by_subj: names.jobs('encode', TINY_MEAN) });
    expect(copy?.header.get(REQUEUE_HEADERS.count)).toBe('3');
    expect(copy?.header.get(REQUEUE_HEADERS.priorDeliveries)).toBe('0');
    expect(copy?.header.get('Nats-Msg-Id')).toBe('single.0.requeue.3');
    expect(copy?.json()).toMatchObject({ job_id: 'single', part: 0, parts: 1 });
    await finish('finisher-2', 'single');
    expect(await jobs.status('single')).toMatchObject({ state: 'completed', parts_done: 1, parts_failed: 0 });
    await expectEveryItemOnce('single', 1, ITEMS.length);
    expect(await deadLetterCount()).toBe(0);
  });

  it('a part that really fails is still dead-lettered after max_deliver, earlier copies\' deliveries included', async () => {
    const worker = await startTestWorker(server.url, prefix, {
      workerId: 'broken',
      models: [BROKEN],
      engine: { modelDirs: [modelDir], threads: 1, memoryBudget: '2GiB' },
      consumer: { ackWaitMs: 30_000, maxDeliver: MAX_DELIVER },
    });
    const { jsm, names } = jobs.topology;
    try {
      const submitted = await jobs.submit({ job_id: 'poison', primitive: 'encode', request: { model: BROKEN, items: ['a', 'b'] } });
      const status = await jobs.wait(submitted.job_id, { timeoutMs: 30_000 });
      expect(status).toMatchObject({ state: 'failed', parts_failed: 1, parts_done: 0 });
      expect(status.errors[0]).toMatchObject({ code: 'MODEL_LOAD_FAILED', part: 0 });
      const dead = await jsm.streams.getMessage(names.deadLetterStream, { last_by_subj: names.deadLetter('encode', BROKEN) });
      expect(dead?.header.get(DEAD_LETTER_HEADERS.code)).toBe('MODEL_LOAD_FAILED');
      expect(dead?.header.get(DEAD_LETTER_HEADERS.deliveries)).toBe(String(MAX_DELIVER));
      expect(dead?.json()).toMatchObject({ job_id: 'poison', part: 0 });

      // A copy handed back after one failed delivery has one delivery left: its first failure
      // dead-letters it (one more delivery by the consumer, not two).
      const deliveredBefore = (await consumerInfo('encode', BROKEN)).delivered.consumer_seq;
      const h = natsHeaders();
      h.set(REQUEUE_HEADERS.count, '1');
      h.set(REQUEUE_HEADERS.priorDeliveries, '1');
      const part = { v: WIRE_VERSION, job_id: 'poison-copy', part: 0, parts: 1, primitive: 'encode', model: BROKEN, request: { model: BROKEN, items: ['c'] }, result: { kind: 'stream' }, submitted_at: new Date().toISOString() };
      await jetstream(nc).publish(names.jobs('encode', BROKEN), JSON.stringify(part), { headers: h, msgID: 'poison-copy.0.requeue.1' });
      await eventually(async () => expect((await jobs.status('poison-copy'))?.state).toBe('failed'), 30_000);
      const copyDead = await jsm.streams.getMessage(names.deadLetterStream, { last_by_subj: names.deadLetter('encode', BROKEN) });
      expect(copyDead?.json()).toMatchObject({ job_id: 'poison-copy' });
      expect(copyDead?.header.get(DEAD_LETTER_HEADERS.deliveries)).toBe(String(MAX_DELIVER));
      expect(copyDead?.header.get(REQUEUE_HEADERS.count)).toBe('1');
      await eventually(async () => {
        const info = await consumerInfo('encode', BROKEN);
        expect(info.num_pending + info.num_ack_pending).toBe(0);
        expect(info.delivered.consumer_seq).toBe(deliveredBefore + 1);
      });
    } finally {
      await worker.drain();
    }
  });
});
