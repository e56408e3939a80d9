import { cpSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jetstream, type JsMsg } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JobsClient } from '../../adapters/nats/jobs/jobs-client.js';
import { DEAD_LETTER_HEADERS } from '../../adapters/protocol/jobs.js';
import type { Primitive } from '../../adapters/protocol/subjects.js';
import { ShoalMetrics } from '../../adapters/observability/metrics.js';
import { resolveWorkerConfig } from '../../services/worker/config.js';
import { ShoalWorker } from '../../services/worker/worker.js';
import { NATS_SERVER_MISSING, eventually, natsServerAvailable, startNatsServer, type NatsServerHandle } from '../helpers/nats-server.js';
import { FIXTURE_MODELS_DIR, TINY_CROSS, TINY_MEAN, quietLogger, testConnection, testWorkerConfig, uniquePrefix } from '../helpers/nats-worker.js';

/**
 * Dead letters against a private nats-server: a part that keeps failing (its model's ONNX file
 * is garbage, so every load fails: retryable, nak'ed, until max_deliver), a part nobody acks
 * (a consumer that "crashes" twice: the max-deliveries advisory path), and a message that is not
 * a job part at all. Each ends in the dead-letter stream with its reason, out of the work queue.
 */

const BROKEN = 'broken-mean';

describe.skipIf(!natsServerAvailable())(`NATS dead letters ${natsServerAvailable() ? '' : NATS_SERVER_MISSING}`, () => {
  let server: NatsServerHandle;
  let nc: NatsConnection;
  let worker: ShoalWorker;
  let jobs: JobsClient;
  const metrics = new ShoalMetrics({ defaultLabels: { service: 'worker' } });
  const prefix = uniquePrefix('dlq');
  const modelDir = mkdtempSync(join(tmpdir(), 'shoal-broken-'));

  beforeAll(async () => {
    cpSync(join(FIXTURE_MODELS_DIR, TINY_MEAN), join(modelDir, BROKEN), { recursive: true });
    writeFileSync(join(modelDir, BROKEN, 'onnx', 'model.onnx'), 'this is not an ONNX graph');
    server = await startNatsServer();
    const config = testWorkerConfig(server.url, prefix, {
      models: [TINY_MEAN, BROKEN],
      engine: { modelDirs: [FIXTURE_MODELS_DIR, modelDir], threads: 1, memoryBudget: '2GiB' },
      consumer: { ackWaitMs: 5_000, maxDeliver: 3 },
    });
    worker = await ShoalWorker.start(resolveWorkerConfig(config), { logger: quietLogger(), metrics });
    nc = await testConnection(server.url);
    jobs = await JobsClient.open(nc, { topology: { prefix }, consumer: { ackWaitMs: 1_000, maxDeliver: 2 } });
  });

  afterAll(async () => {
    await worker?.drain();
    await nc?.close();
    await server?.stop();
    rmSync(modelDir, { recursive: true, force: true });
  });

  /** shoal_job_parts_total of this worker for one outcome of a primitive and model. */
  async function partsCounted(primitive: Primitive, model: string, outcome: string): Promise<number> {
    const { values } = await metrics.jobParts.get();
    return values.find((v) => v.labels.primitive === primitive && v.labels.model === model && v.labels.outcome === outcome)?.value ?? 0;
  }

  async function deadLetter(primitive: Primitive, model: string) {
    const names = jobs.topology.names;
    return jobs.topology.jsm.streams.getMessage(names.deadLetterStream, { last_by_subj: names.deadLetter(primitive, model) });
  }

  /** The part left the work queue (the worker's term() or the handler's delete lands just after the dead letter). */
  async function workQueueEmpty(primitive: Primitive, model: string): Promise<void> {
    const names = jobs.topology.names;
    await eventually(async () => {
      const consumer = await jobs.topology.jsm.consumers.info(names.jobsStream, names.consumer(primitive, model));
      expect(consumer.num_pending + consumer.num_ack_pending).toBe(0);
      const stream = await jobs.topology.jsm.streams.info(names.jobsStream, { subjects_filter: names.jobs(primitive, model) });
      expect(stream.state.subjects?.[names.jobs(primitive, model)] ?? 0).toBe(0);
    });
  }

  it('dead-letters a part that fails on every delivery, with the reason, and fails the job', async () => {
    const submitted = await jobs.submit({ job_id: 'poison', primitive: 'encode', request: { model: BROKEN, items: ['a', 'b'] } });
    const status = await jobs.wait(submitted.job_id, { timeoutMs: 30_000 });
    expect(status).toMatchObject({ state: 'failed', parts_failed: 1, parts_done: 0 });
    expect(status.errors[0]).toMatchObject({ code: 'MODEL_LOAD_FAILED', part: 0 });

    const dead = await deadLetter('encode', BROKEN);
    expect(dead).not.toBeNull();
    expect(dead?.header.get(DEAD_LETTER_HEADERS.code)).toBe('MODEL_LOAD_FAILED');
    expect(dead?.header.get(DEAD_LETTER_HEADERS.deliveries)).toBe('3');
    expect(dead?.header.get(DEAD_LETTER_HEADERS.subject)).toBe(jobs.topology.names.jobs('encode', BROKEN));
    expect(dead?.header.get(DEAD_LETTER_HEADERS.reason)).not.toBe('');
    // The part's own message id travels in its own header (the copy's id is the stream sequence).
    expect(dead?.header.get(DEAD_LETTER_HEADERS.messageId)).toBe('poison.0');
    // The body is the original part, unchanged.
    expect(dead?.json()).toMatchObject({ job_id: 'poison', part: 0, request: { model: BROKEN, items: [{ text: 'a' }, { text: 'b' }] } });
    expect(await jobs.partResult('poison', 0)).toMatchObject({ status: 'error', error: { code: 'MODEL_LOAD_FAILED' } });
    await workQueueEmpty('encode', BROKEN);
  });

  it('dead-letters a part nobody acked within max_deliver (the advisory path) and deletes it from the queue', async () => {
    // The worker does not serve the cross-encoder: this test is the "worker" that crashes twice.
    const submitted = await jobs.submit({ job_id: 'abandoned', primitive: 'score', request: { model: TINY_CROSS, query: 'q', items: ['x'] } });
    const consumer = await jetstream(nc).consumers.get(jobs.topology.names.jobsStream, jobs.topology.names.consumer('score', TINY_CROSS));
    const deliveries: JsMsg[] = [];
    while (deliveries.length < 2) {
      // The second fetch returns once the first delivery's ack wait (1 s) has run out.
      for await (const msg of await consumer.fetch({ max_messages: 1, expires: 5_000 })) deliveries.push(msg);
    }
    expect(deliveries.map((m) => m.info.deliveryCount)).toEqual([1, 2]);
    // The server raises the advisory when it would deliver a third time, that is on a pull
    // (a live worker serving the model makes one); this one gets nothing.
    const third: JsMsg[] = [];
    for await (const msg of await consumer.fetch({ max_messages: 1, expires: 2_500 })) third.push(msg);
    expect(third).toEqual([]);

    const status = await jobs.wait(submitted.job_id, { timeoutMs: 30_000 });
    expect(status).toMatchObject({ state: 'failed', parts_failed: 1 });
    expect(status.errors[0]?.code).toBe('TIMEOUT');
    const dead = await deadLetter('score', TINY_CROSS);
    expect(dead?.header.get(DEAD_LETTER_HEADERS.deliveries)).toBe('2');
    expect(dead?.header.get(DEAD_LETTER_HEADERS.sequence)).toBe(String(deliveries[0]?.seq));
    expect(dead?.header.get(DEAD_LETTER_HEADERS.reason)).toMatch(/without an ack/);
    expect(dead?.json()).toMatchObject({ job_id: 'abandoned', part: 0 });
    await workQueueEmpty('score', TINY_CROSS);
    // Counted as a dead letter by the worker that buried it from the advisory, though it never served the part.
    await eventually(async () => expect(await partsCounted('score', TINY_CROSS, 'dead')).toBe(1));
  });

  it('dead-letters a message that is not a job part and terminates it', async () => {
    const names = jobs.topology.names;
    // Read the dead-letter subject as it fills: the worker handles the message asynchronously.
    const reader = await jetstream(nc).consumers.get(names.deadLetterStream, { filter_subjects: names.deadLetter('encode', TINY_MEAN) });
    await jetstream(nc).publish(names.jobs('encode', TINY_MEAN), 'not json at all');
    const dead = await reader.next({ expires: 30_000 });
    expect(dead).not.toBeNull();
    expect(dead?.headers?.get(DEAD_LETTER_HEADERS.code)).toBe('INVALID_INPUT');
    expect(dead?.headers?.get(DEAD_LETTER_HEADERS.reason)).toMatch(/not JSON/);
    expect(dead?.string()).toBe('not json at all');
    await workQueueEmpty('encode', TINY_MEAN);
  });
});
