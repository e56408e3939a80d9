import { jetstream } from '@nats-io/jetstream';
import { Objm } from '@nats-io/obj';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JobsClient } from '../../adapters/nats/jobs/jobs-client.js';
import { ErrorCode, isShoalError } from '../../adapters/protocol/errors.js';
import { WIRE_VERSION } from '../../adapters/protocol/jobs.js';
import { natsNames } from '../../adapters/protocol/subjects.js';
import { EncodeResult } from '../../adapters/protocol/results.js';
import type { ShoalWorker } from '../../services/worker/worker.js';
import { NATS_SERVER_MISSING, eventually, natsServerAvailable, startNatsServer, type NatsServerHandle } from '../helpers/nats-server.js';
import { TINY_MEAN, encodePart, startTestWorker, testConnection, uniquePrefix } from '../helpers/nats-worker.js';
import { jsonl, runShoal } from '../helpers/shoal-cli.js';

/**
 * `obj://` references naming an object store bucket that does not exist. Buckets are never
 * created from a job (a remote caller must not create streams on the server; docs/nats.md), so:
 * - a result target in a missing bucket is refused at submit (INVALID_INPUT, `shoal submit` exit
 *   2), before any status, consumer or part exists;
 * - a part that reaches a worker anyway (published by hand, or the bucket deleted meanwhile) fails
 *   on its first delivery with INVALID_INPUT and term(), not retried five times as INTERNAL;
 *   a store target is checked before the inference runs;
 * - the same for a part whose `payload_ref` names a missing bucket.
 */

describe.skipIf(!natsServerAvailable())(`obj:// buckets that do not exist ${natsServerAvailable() ? '' : NATS_SERVER_MISSING}`, () => {
  let server: NatsServerHandle;
  let nc: NatsConnection;
  let worker: ShoalWorker;
  let jobs: JobsClient;
  const prefix = uniquePrefix('bucket');
  // Buckets of this deployment other than its payload bucket are named `<p>-<name>` (isDeploymentBucket).
  const own = (name: string): string => `${natsNames(prefix).payloadBucket.replace(/_payloads$/, '')}-${name}`;

  beforeAll(async () => {
    server = await startNatsServer();
    worker = await startTestWorker(server.url, prefix, { consumer: { ackWaitMs: 5_000, maxDeliver: 5 } });
    nc = await testConnection(server.url);
    jobs = await JobsClient.open(nc, { topology: { prefix } });
  });

  afterAll(async () => {
    await worker?.drain();
    await nc?.close();
    await server?.stop();
  });

  const consumerInfo = () => jobs.topology.jsm.consumers.info(jobs.topology.names.jobsStream, jobs.topology.names.consumer('encode', TINY_MEAN));

  it('refuses at submit a result target in a bucket that does not exist, storing nothing', async () => {
    const before = (await jobs.topology.jsm.streams.info(jobs.topology.names.jobsStream)).state.last_seq;
    const error: unknown = await jobs
      .submit({ job_id: 'no-bucket', primitive: 'encode', request: { model: TINY_MEAN, items: ['a'] }, result: { kind: 'store', uri: `obj://${own('newbucket')}/out` } })
      .catch((e: unknown) => e);
    expect(isShoalError(error)).toBe(true);
    if (!isShoalError(error)) return;
    expect(error.code).toBe(ErrorCode.INVALID_INPUT);
    expect(error.message).toContain(`object store bucket "${own('newbucket')}" does not exist`);
    expect(error.details).toMatchObject({ field: 'result.uri' });
    expect(await jobs.status('no-bucket')).toBeNull();
    expect((await jobs.topology.jsm.streams.info(jobs.topology.names.jobsStream)).state.last_seq).toBe(before);
    // No bucket was created either.
    await expect(jobs.topology.jsm.streams.info(`OBJ_${own('newbucket')}`)).rejects.toThrow(/stream not found/);
  });

  it('refuses an obj:// target without a bucket name or with an invalid one', async () => {
    for (const uri of ['obj://bad.bucket/out', 'obj://bad*bucket']) {
      const error: unknown = await jobs.submit({ primitive: 'encode', request: { model: TINY_MEAN, items: ['a'] }, result: { kind: 'store', uri } }).catch((e: unknown) => e);
      expect(isShoalError(error) ? error.code : error, uri).toBe(ErrorCode.INVALID_INPUT);
    }
  });

  it('writes results into a bucket that exists', async () => {
    await new Objm(nc).create(own('existing'));
    const submitted = await jobs.submit({ job_id: 'in-bucket', primitive: 'encode', request: { model: TINY_MEAN, items: ['a', 'b', 'c'] }, part_items: 2, result: { kind: 'store', uri: `obj://${own('existing')}/out` } });
    expect(await jobs.wait(submitted.job_id, { timeoutMs: 30_000 })).toMatchObject({ state: 'completed', parts_done: 2 });
    const second = await jobs.partResult('in-bucket', 1, false);
    expect(second?.result_ref).toBe(`obj://${own('existing')}/out/in-bucket/part-1.jsonl`);
    expect(EncodeResult.parse((await jobs.partResult('in-bucket', 1))?.result).items.map((item) => item.index)).toEqual([2]);
  });

  it('terminates on the first delivery a part whose store target bucket is missing (published past the submit check)', async () => {
    const delivered = (await consumerInfo()).delivered.consumer_seq;
    const part = { ...encodePart('worker-no-bucket'), result: { kind: 'store', uri: `obj://${own('newbucket')}/out` } };
    await jetstream(nc).publish(jobs.topology.names.jobs('encode', TINY_MEAN), JSON.stringify(part));
    const status = await jobs.wait('worker-no-bucket', { timeoutMs: 30_000 });
    expect(status).toMatchObject({ state: 'failed', parts_failed: 1, parts_done: 0 });
    expect(status.errors[0]).toMatchObject({ code: 'INVALID_INPUT', part: 0 });
    expect(status.errors[0]?.message).toContain(`"${own('newbucket')}" does not exist`);
    expect(await jobs.partResult('worker-no-bucket', 0)).toMatchObject({ status: 'error', error: { code: 'INVALID_INPUT' } });
    await eventually(async () => {
      const info = await consumerInfo();
      expect(info.num_pending + info.num_ack_pending).toBe(0);
      expect(info.delivered.consumer_seq).toBe(delivered + 1);
    });
  });

  it('terminates on the first delivery a part whose payload_ref names a missing bucket', async () => {
    const delivered = (await consumerInfo()).delivered.consumer_seq;
    const part = {
      v: WIRE_VERSION,
      job_id: 'ref-no-bucket',
      part: 0,
      parts: 1,
      primitive: 'encode',
      model: TINY_MEAN,
      payload_ref: `obj://${own('nobucket')}/x`,
      result: { kind: 'stream' },
      submitted_at: new Date().toISOString(),
    };
    await jetstream(nc).publish(jobs.topology.names.jobs('encode', TINY_MEAN), JSON.stringify(part));
    const status = await jobs.wait('ref-no-bucket', { timeoutMs: 30_000 });
    expect(status).toMatchObject({ state: 'failed', parts_failed: 1 });
    expect(status.errors[0]).toMatchObject({ code: 'INVALID_INPUT', part: 0 });
    expect(status.errors[0]?.message).toContain(`"${own('nobucket')}" does not exist`);
    await eventually(async () => {
      const info = await consumerInfo();
      expect(info.num_pending + info.num_ack_pending).toBe(0);
      expect(info.delivered.consumer_seq).toBe(delivered + 1);
    });
  });

  it('shoal submit --result-uri in a missing bucket exits 2 with INVALID_INPUT', async () => {
    const run = await runShoal(['submit', 'encode', '--model', TINY_MEAN, '--nats', server.url, '--prefix', prefix, '--job-id', 'cli-no-bucket', '--result-uri', `obj://${own('newbucket')}/out`], {
      stdin: jsonl([{ id: 1, text: 'a' }]),
    });
    expect(run.stderr).toContain('error [INVALID_INPUT]');
    expect(run.stderr).toContain(`"${own('newbucket')}" does not exist`);
    expect(run.code).toBe(2);
    expect(await jobs.status('cli-no-bucket')).toBeNull();
  });
});
