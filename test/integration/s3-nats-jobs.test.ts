import { jetstream } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JobsClient } from '../../adapters/nats/jobs/jobs-client.js';
import { StatusStore, initialStatus } from '../../adapters/nats/jobs/status-store.js';
import { S3Store } from '../../adapters/object-store/index.js';
import { ErrorCode } from '../../adapters/protocol/errors.js';
import { EncodeResult } from '../../adapters/protocol/results.js';
import { WIRE_VERSION } from '../../adapters/protocol/jobs.js';
import type { InferenceEngine } from '../../pipelines/inference/engine.js';
import { expectAllClose } from '../helpers/conformance.js';
import { NATS_SERVER_MISSING, natsServerAvailable, startNatsServer, type NatsServerHandle } from '../helpers/nats-server.js';
import { startS3Server, type S3ServerHandle } from '../helpers/s3-server.js';
import { TINY_MEAN, quietLogger, referenceEngine, testConnection, testWorkerConfig, uniquePrefix } from '../helpers/nats-worker.js';
import { ShoalMetrics } from '../../adapters/observability/metrics.js';
import { resolveWorkerConfig } from '../../services/worker/config.js';
import { ShoalWorker } from '../../services/worker/worker.js';

/**
 * `s3://` in NATS jobs, end to end: a private nats-server, a private s3rver and a worker on the
 * fixture model. Payload references read from S3, results written to an S3 target as one JSON
 * Lines object per part, and a 4-s S3 outage during result writes: every part's result lands
 * exactly once and the job completes.
 */

const BUCKET = 'shoal-jobs';
const TEXTS = Array.from({ length: 12 }, (_, i) => `sentence ${i} about ${i % 2 === 0 ? 'boats' : 'bread'}`);

describe.skipIf(!natsServerAvailable())(`S3 references in NATS jobs ${natsServerAvailable() ? '' : NATS_SERVER_MISSING}`, () => {
  let nats: NatsServerHandle;
  let s3server: S3ServerHandle;
  let nc: NatsConnection;
  let worker: ShoalWorker;
  let jobs: JobsClient;
  let store: S3Store;
  let reference: InferenceEngine;
  const prefix = uniquePrefix('s3jobs');
  const metrics = new ShoalMetrics({ processMetrics: false });

  beforeAll(async () => {
    nats = await startNatsServer();
    s3server = await startS3Server([BUCKET]);
    worker = await ShoalWorker.start(resolveWorkerConfig(testWorkerConfig(nats.url, prefix, { s3: s3server.settings({ operationRetryMs: 20_000 }) })), { logger: quietLogger(), metrics });
    nc = await testConnection(nats.url);
    jobs = await JobsClient.open(nc, { topology: { prefix }, s3: s3server.settings() });
    store = new S3Store(s3server.settings());
    reference = referenceEngine();
  });

  afterAll(async () => {
    await worker?.drain();
    await nc?.close();
    await reference?.close();
    store?.close();
    await s3server?.stop();
    await nats?.stop();
  });

  async function partKeys(jobId: string): Promise<string[]> {
    const keys: string[] = [];
    for await (const object of store.list({ bucket: BUCKET, key: `results/${jobId}/` })) keys.push(object.key);
    return keys;
  }

  /** Messages on the results stream for a job (one per part when nothing was duplicated). */
  async function resultMessages(jobId: string): Promise<number> {
    const info = await jobs.topology.jsm.streams.info(jobs.topology.names.resultsStream, { subjects_filter: `${prefix}.results.${jobId}.>` });
    return Object.values(info.state.subjects ?? {}).reduce((sum, count) => sum + count, 0);
  }

  async function checkResults(jobId: string, parts: number, partItems: number): Promise<void> {
    expect(await partKeys(jobId)).toEqual(Array.from({ length: parts }, (_, n) => `results/${jobId}/part-${n}.jsonl`).sort());
    expect(await resultMessages(jobId)).toBe(parts);
    const expected = await reference.encode({ model: TINY_MEAN, items: TEXTS });
    for (let part = 0; part < parts; part++) {
      const body = (await store.read({ bucket: BUCKET, key: `results/${jobId}/part-${part}.jsonl` }, 10_000_000)).toString('utf8');
      const result = EncodeResult.parse(JSON.parse(body));
      expect(result.items.map((item) => item.index)).toEqual(Array.from({ length: Math.min(partItems, TEXTS.length - part * partItems) }, (_, i) => part * partItems + i));
      for (const item of result.items) expectAllClose(item.dense ?? [], expected.items[item.index]?.dense ?? [], 1e-5, `item ${item.index}`);
    }
  }

  it('writes results to an s3:// target, one JSON object per part, and reads them back through the result references', async () => {
    const submitted = await jobs.submit({ job_id: 's3-results', primitive: 'encode', request: { model: TINY_MEAN, items: TEXTS }, part_items: 4, result: { kind: 'store', uri: `s3://${BUCKET}/results` } });
    const status = await jobs.wait(submitted.job_id, { timeoutMs: 30_000 });
    expect(status).toMatchObject({ state: 'completed', parts: 3, parts_done: 3, parts_failed: 0 });
    await checkResults('s3-results', 3, 4);
    const resolved = [];
    for await (const part of jobs.results('s3-results')) resolved.push(part);
    expect(resolved.map((part) => part.result_ref)).toEqual([0, 1, 2].map((n) => `s3://${BUCKET}/results/s3-results/part-${n}.jsonl`));
    expect(resolved.flatMap((part) => EncodeResult.parse(part.result).items.map((item) => item.index))).toEqual(TEXTS.map((_, i) => i));
  }, 40_000);

  it('refuses at submit a malformed s3:// target, and one outside SHOAL_S3_BUCKETS', async () => {
    await expect(
      jobs.submit({ primitive: 'encode', request: { model: TINY_MEAN, items: ['a'] }, result: { kind: 'store', uri: 's3://Bad_Bucket/x' } }),
    ).rejects.toMatchObject({ code: ErrorCode.INVALID_INPUT, message: expect.stringContaining('bucket names') });
    const limited = await JobsClient.open(nc, { topology: { prefix }, s3: s3server.settings({ allowedBuckets: ['only-this-bucket'] }) });
    await expect(
      limited.submit({ job_id: 'not-allowed', primitive: 'encode', request: { model: TINY_MEAN, items: ['a'] }, result: { kind: 'store', uri: `s3://${BUCKET}/results` } }),
    ).rejects.toMatchObject({ code: ErrorCode.INVALID_INPUT, message: expect.stringContaining('not an allowed bucket') });
    expect(await jobs.status('not-allowed')).toBeNull();
  });

  it('reads a part whose request is an s3:// payload reference; a missing object ends the part with INVALID_INPUT', async () => {
    await store.write({ bucket: BUCKET, key: 'payloads/request.json' }, Buffer.from(JSON.stringify({ model: TINY_MEAN, items: TEXTS.slice(0, 5) })));
    const status = await StatusStore.open(nc, jobs.topology.names.statusBucket);
    const js = jetstream(nc);
    for (const [jobId, key] of [['s3-payload', 'payloads/request.json'], ['s3-payload-missing', 'payloads/missing.json']] as const) {
      const envelope = { job_id: jobId, primitive: 'encode', model: TINY_MEAN, parts: 1, result: { kind: 'stream' } } as const;
      await status.create(initialStatus(envelope, 5));
      const part = { ...envelope, v: WIRE_VERSION, part: 0, payload_ref: `s3://${BUCKET}/${key}`, submitted_at: new Date().toISOString() };
      await js.publish(jobs.topology.names.jobs('encode', TINY_MEAN), JSON.stringify(part), { msgID: `${jobId}.0` });
    }
    expect(await jobs.wait('s3-payload', { timeoutMs: 30_000 })).toMatchObject({ state: 'completed', parts_done: 1 });
    const results = [];
    for await (const part of jobs.results('s3-payload')) results.push(part);
    const [result] = results;
    const expected = await reference.encode({ model: TINY_MEAN, items: TEXTS.slice(0, 5) });
    const items = EncodeResult.parse(result?.result).items;
    expect(items).toHaveLength(5);
    for (const [i, item] of items.entries()) expectAllClose(item.dense ?? [], expected.items[i]?.dense ?? [], 1e-5, `item ${i}`);
    const missing = await jobs.wait('s3-payload-missing', { timeoutMs: 30_000 });
    expect(missing).toMatchObject({ state: 'failed', parts_failed: 1 });
    expect(missing.errors[0]).toMatchObject({ code: ErrorCode.INVALID_INPUT, message: expect.stringContaining('does not exist') });
  }, 40_000);

  it('rides out S3 outages during result writes: every part lands exactly once, the job completes', async () => {
    // The 30-s outage is test/reliability/s3-outage.test.ts.
    const downMs = 4_000;
    for (const jobId of ['s3-outage']) {
      await s3server.halt();
      const started = Date.now();
      await jobs.submit({ job_id: jobId, primitive: 'encode', request: { model: TINY_MEAN, items: TEXTS }, part_items: 2, result: { kind: 'store', uri: `s3://${BUCKET}/results` } });
      await new Promise((resolve) => setTimeout(resolve, downMs));
      // Nothing could be written while the server was down, and the job is still running.
      expect((await jobs.status(jobId))?.parts_done).toBe(0);
      await s3server.start();
      const status = await jobs.wait(jobId, { timeoutMs: 30_000 });
      expect(status).toMatchObject({ state: 'completed', parts: 6, parts_done: 6, parts_failed: 0 });
      expect(Date.now() - started).toBeGreaterThanOrEqual(downMs);
      await checkResults(jobId, 6, 2);
      // The retries were visible while S3 was down: counted in shoal_s3_retries_total.
      expect(Number(/^shoal_s3_retries_total (\d+)/m.exec((await metrics.render()).body)?.[1] ?? 0)).toBeGreaterThan(0);
    }
  }, 120_000);
});
