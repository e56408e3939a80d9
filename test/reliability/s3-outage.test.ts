import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JobsClient } from '../../adapters/nats/jobs/jobs-client.js';
import { S3Store } from '../../adapters/object-store/index.js';
import { EncodeResult } from '../../adapters/protocol/results.js';
import type { ShoalWorker } from '../../services/worker/worker.js';
import { NATS_SERVER_MISSING, natsServerAvailable, startNatsServer, type NatsServerHandle } from '../helpers/nats-server.js';
import { startS3Server, type S3ServerHandle } from '../helpers/s3-server.js';
import { TINY_MEAN, startTestWorker, testConnection, uniquePrefix } from '../helpers/nats-worker.js';

/**
 * The S3 outage: s3rver stopped for 30 s in the middle of a NATS job writing its results
 * to s3://, then restarted. The worker keeps its parts (working() holds the ack wait, the S3
 * operation retry outlasts the outage), every part's result object is written exactly once,
 * each part is published once on the results stream and the job completes.
 */

const BUCKET = 'shoal-outage';
const TEXTS = Array.from({ length: 40 }, (_, i) => `outage sentence ${i}`);
const OUTAGE_MS = 30_000;

describe.skipIf(!natsServerAvailable())(`S3 outage during a job ${natsServerAvailable() ? '' : NATS_SERVER_MISSING}`, () => {
  let nats: NatsServerHandle;
  let s3server: S3ServerHandle;
  let nc: NatsConnection;
  let worker: ShoalWorker;
  let jobs: JobsClient;
  let store: S3Store;
  const prefix = uniquePrefix('s3outage');

  beforeAll(async () => {
    nats = await startNatsServer();
    s3server = await startS3Server([BUCKET]);
    // 45 s of operation retries: the worker rides out the 30-s outage inside one delivery.
    worker = await startTestWorker(nats.url, prefix, { s3: s3server.settings({ operationRetryMs: 45_000 }), consumer: { ackWaitMs: 5_000, maxDeliver: 3 } });
    nc = await testConnection(nats.url);
    jobs = await JobsClient.open(nc, { topology: { prefix }, s3: s3server.settings() });
    store = new S3Store(s3server.settings());
  });

  afterAll(async () => {
    await worker?.drain();
    await nc?.close();
    store?.close();
    await s3server?.stop();
    await nats?.stop();
  });

  it('s3rver down for 30 s mid-job, then back: every part present exactly once, the job completes', async () => {
    // A first part lands before the outage, so the outage is in the middle of the job.
    await jobs.submit({ job_id: 'before', primitive: 'encode', request: { model: TINY_MEAN, items: TEXTS.slice(0, 2) }, result: { kind: 'store', uri: `s3://${BUCKET}/results` } });
    await jobs.wait('before', { timeoutMs: 30_000 });
    await s3server.halt();
    const started = Date.now();
    await jobs.submit({ job_id: 'outage', primitive: 'encode', request: { model: TINY_MEAN, items: TEXTS }, part_items: 4, result: { kind: 'store', uri: `s3://${BUCKET}/results` } });
    await new Promise((resolve) => setTimeout(resolve, OUTAGE_MS));
    const during = await jobs.status('outage');
    expect(during).toMatchObject({ parts_done: 0, parts_failed: 0 });
    expect(['queued', 'running']).toContain(during?.state);
    await s3server.start();
    const status = await jobs.wait('outage', { timeoutMs: 30_000 });
    expect(status).toMatchObject({ state: 'completed', parts: 10, parts_done: 10, parts_failed: 0, items: 40 });
    expect(Date.now() - started).toBeGreaterThanOrEqual(OUTAGE_MS);

    const keys: string[] = [];
    for await (const object of store.list({ bucket: BUCKET, key: 'results/outage/' })) keys.push(object.key);
    expect(keys).toEqual(Array.from({ length: 10 }, (_, n) => `results/outage/part-${n}.jsonl`).sort());
    const indexes: number[] = [];
    for (const key of keys) indexes.push(...EncodeResult.parse(JSON.parse((await store.read({ bucket: BUCKET, key }, 1e7)).toString('utf8'))).items.map((item) => item.index));
    expect(indexes.sort((a, b) => a - b)).toEqual(TEXTS.map((_, i) => i));
    const info = await jobs.topology.jsm.streams.info(jobs.topology.names.resultsStream, { subjects_filter: `${prefix}.results.outage.>` });
    expect(Object.values(info.state.subjects ?? {})).toEqual(Array.from({ length: 10 }, () => 1));
  }, 90_000);
});
