import { spawn, type ChildProcess } from 'node:child_process';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JobsClient } from '../../adapters/nats/jobs/jobs-client.js';
import type { JobStatus } from '../../adapters/protocol/jobs.js';
import { EncodeResult } from '../../adapters/protocol/results.js';
import type { ShoalWorker } from '../../services/worker/worker.js';
import { NATS_SERVER_MISSING, natsServerAvailable, startNatsServer, type NatsServerHandle } from '../helpers/nats-server.js';
import { FIXTURE_MODELS_DIR, TINY_MEAN, startTestWorker, testConnection, uniquePrefix } from '../helpers/nats-worker.js';
import { SHOAL_BIN } from '../helpers/shoal-cli.js';
import { CLI_FROM_SOURCE } from '../helpers/cli-build.js';

/**
 * Delivery guarantees with real processes: a `shoal worker` killed (SIGKILL) in the middle of a
 * job, one stopped with SIGTERM (graceful drain), and a broker restart under a running worker.
 * In every case the job ends completed with exactly one result per part.
 */

const PARTS = 300;
const ITEMS = Array.from({ length: PARTS * 2 }, (_, i) => ({ id: i, text: `item ${i} ${i % 3 === 0 ? 'red fox' : 'blue sky'}` }));

interface ChildWorker {
  process: ChildProcess;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** `shoal worker` as its own process; resolves once it logged "worker started". */
async function spawnWorker(url: string, prefix: string, id: string): Promise<ChildWorker> {
  const args = [SHOAL_BIN, '--model-dir', FIXTURE_MODELS_DIR, '--threads', '1', 'worker', '--models', TINY_MEAN, '--nats', url, '--prefix', prefix];
  const child = spawn(process.execPath, [...args, '--concurrency', '2', '--ack-wait', '2000', '--worker-id', id], {
    // MALLOC_TRIM_THRESHOLD_ set: bin/shoal.js runs the CLI in this process instead of a child,
    // so SIGKILL reaches the worker itself (a wrapper killed alone would leave it running).
    env: { ...process.env, SHOAL_FROM_SOURCE: CLI_FROM_SOURCE, MALLOC_TRIM_THRESHOLD_: '0', SHOAL_LOG_LEVEL: process.env.SHOAL_TEST_LOG_LEVEL ?? 'info' },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  let log = '';
  await new Promise<void>((resolve, reject) => {
    child.stderr?.on('data', (chunk: Buffer) => {
      log += chunk.toString('utf8');
      if (process.env.SHOAL_TEST_LOG_LEVEL !== undefined) process.stderr.write(chunk);
      if (log.includes('"worker started"')) resolve();
    });
    void exited.then(({ code }) => reject(new Error(`shoal worker exited with ${String(code)} before it started:\n${log.slice(-3000)}`)));
  });
  return { process: child, exited };
}

/** Resolves with the status once `ready(status)` holds. */
async function statusWhen(jobs: JobsClient, jobId: string, ready: (s: JobStatus) => boolean): Promise<JobStatus> {
  const stop = new AbortController();
  for await (const status of jobs.watch(jobId, stop.signal)) {
    if (ready(status)) {
      stop.abort();
      return status;
    }
  }
  throw new Error(`stopped watching job ${jobId}`);
}

let connection: NatsConnection | null = null;
function nc(): NatsConnection {
  if (connection === null) throw new Error('not connected');
  return connection;
}

/** Exactly one result message per part, every item present once, in order. */
async function expectExactlyOnce(jobs: JobsClient, jobId: string): Promise<void> {
  const { jsm, names } = jobs.topology;
  const info = await jsm.streams.info(names.resultsStream, { subjects_filter: names.jobResults(jobId) });
  const perSubject = Object.values(info.state.subjects ?? {});
  expect(perSubject.length).toBe(PARTS);
  expect(perSubject.every((count) => count === 1)).toBe(true);
  const indexes: number[] = [];
  for await (const part of jobs.results(jobId)) indexes.push(...EncodeResult.parse(part.result).items.map((item) => item.index));
  expect(indexes).toEqual(ITEMS.map((_, i) => i));
}

describe.skipIf(!natsServerAvailable())(`NATS delivery guarantees ${natsServerAvailable() ? '' : NATS_SERVER_MISSING}`, () => {
  let server: NatsServerHandle;
  let jobs: JobsClient;
  const workers: ShoalWorker[] = [];
  const prefix = uniquePrefix('rel');

  beforeAll(async () => {
    server = await startNatsServer();
    connection = await testConnection(server.url);
    jobs = await JobsClient.open(nc(), { topology: { prefix } });
  });

  afterAll(async () => {
    for (const worker of workers) await worker.drain();
    await connection?.close();
    await server?.stop();
  });

  it('redelivers the parts of a worker killed mid-job and completes each part once', async () => {
    const child = await spawnWorker(server.url, prefix, 'doomed');
    const submitted = await jobs.submit({ job_id: 'killed', primitive: 'encode', request: { model: TINY_MEAN, items: ITEMS }, part_items: 2 });
    const midway = await statusWhen(jobs, 'killed', (s) => s.parts_done >= 10);
    const { jsm, names } = jobs.topology;
    const consumer = () => jsm.consumers.info(names.jobsStream, names.consumer('encode', TINY_MEAN));
    // With 2 parts in flight the worker is now and then between an ack and its next fetch,
    // holding nothing: kill it only once it is caught (frozen, so no ack can land between the
    // check and the kill) holding parts it has not acked.
    for (;;) {
      child.process.kill('SIGSTOP');
      if ((await consumer()).num_ack_pending > 0) break;
      child.process.kill('SIGCONT');
      await new Promise((wait) => setTimeout(wait, 5));
    }
    child.process.kill('SIGKILL');
    await child.exited;
    const atKill = await consumer();
    expect(midway.parts_done).toBeLessThan(PARTS);
    expect((await jobs.status('killed'))?.state).toBe('running');
    // The killed worker held parts it had not acked: they can only complete by redelivery.
    expect(atKill.num_ack_pending).toBeGreaterThan(0);

    workers.push(await startTestWorker(server.url, prefix, { workerId: 'rescuer', consumer: { ackWaitMs: 2_000, maxDeliver: 5 } }));
    const final = await jobs.wait(submitted.job_id, { timeoutMs: 45_000 });
    expect(final).toMatchObject({ state: 'completed', parts_done: PARTS, parts_failed: 0 });
    await expectExactlyOnce(jobs, 'killed');
  });

  it('resumes work after a broker restart in the middle of a job', async () => {
    const submitted = await jobs.submit({ job_id: 'restarted', primitive: 'encode', request: { model: TINY_MEAN, items: ITEMS }, part_items: 2 });
    await statusWhen(jobs, 'restarted', (s) => s.parts_done >= 10);
    const reconnected = (async () => {
      for await (const status of nc().status()) if (status.type === 'reconnect') return;
    })();
    await server.restart();
    await reconnected;
    expect((await jobs.status('restarted'))?.parts_done).toBeLessThan(PARTS);
    const final = await jobs.wait(submitted.job_id, { timeoutMs: 45_000 });
    expect(final).toMatchObject({ state: 'completed', parts_done: PARTS, parts_failed: 0 });
    await expectExactlyOnce(jobs, 'restarted');
  });

  it('drains on SIGTERM: in-flight parts finish and are acked, nothing is left half-done', async () => {
    for (const worker of workers.splice(0)) await worker.drain();
    const child = await spawnWorker(server.url, prefix, 'drained');
    const submitted = await jobs.submit({ job_id: 'drained', primitive: 'encode', request: { model: TINY_MEAN, items: ITEMS }, part_items: 2 });
    await statusWhen(jobs, 'drained', (s) => s.parts_done >= 10);
    child.process.kill('SIGTERM');
    expect(await child.exited).toEqual({ code: 0, signal: null });

    const { jsm, names } = jobs.topology;
    const consumer = await jsm.consumers.info(names.jobsStream, names.consumer('encode', TINY_MEAN));
    const status = await jobs.status('drained');
    // Every part is either counted or back in the queue: none held by the stopped worker.
    expect(consumer.num_ack_pending).toBe(0);
    expect((status?.parts_done ?? 0) + consumer.num_pending).toBe(PARTS);
    expect(status?.parts_done).toBeLessThan(PARTS);

    workers.push(await startTestWorker(server.url, prefix, { workerId: 'finisher', consumer: { ackWaitMs: 2_000, maxDeliver: 5 } }));
    await jobs.wait(submitted.job_id, { timeoutMs: 45_000 });
    await expectExactlyOnce(jobs, 'drained');
  });
});
