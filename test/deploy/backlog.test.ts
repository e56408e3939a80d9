import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IMAGE_TOKENS, JobBacklog, registerBacklogMetrics, type BacklogEntry } from '../../adapters/nats/jobs/backlog.js';
import { JobsClient } from '../../adapters/nats/jobs/jobs-client.js';
import { ShoalMetrics } from '../../adapters/observability/metrics.js';
import type { ShoalWorker } from '../../services/worker/worker.js';
import { NATS_SERVER_MISSING, natsServerAvailable, startNatsServer, type NatsServerHandle } from '../helpers/nats-server.js';
import { TINY_CROSS, TINY_MEAN, startTestWorker, testConnection, uniquePrefix } from '../helpers/nats-worker.js';
import { readJsz, sample, spawnWorker } from './processes.js';

/**
 * shoal_backlog_{parts,items,tokens}: the queued work of the jobs stream per model and primitive,
 * checked against a real nats-server: exact counts for known jobs, equal to KEDA's lag
 * (num_pending + num_ack_pending) at every point, unchanged by a worker killed with parts in
 * flight (its parts are still owed), and back to 0 (a series at 0, not a missing one) once done.
 */

/** The estimate the backlog documents: ceil(chars / 4) + 2 per text. */
const tokensOf = (text: string): number => Math.ceil(text.length / 4) + 2;

function entry(entries: readonly BacklogEntry[], primitive: string, model: string): BacklogEntry | undefined {
  return entries.find((e) => e.primitive === primitive && e.model === model);
}

describe.skipIf(!natsServerAvailable())(`token backlog on a real nats-server ${natsServerAvailable() ? '' : NATS_SERVER_MISSING}`, () => {
  let server: NatsServerHandle;
  let nc: NatsConnection;
  let jobs: JobsClient;
  let backlog: JobBacklog;
  const workers: ShoalWorker[] = [];
  const prefix = uniquePrefix('backlog');

  beforeAll(async () => {
    server = await startNatsServer();
    nc = await testConnection(server.url);
    jobs = await JobsClient.open(nc, { topology: { prefix } });
    backlog = JobBacklog.of(nc, jobs.topology);
  });

  afterAll(async () => {
    for (const worker of workers) await worker.drain();
    await nc?.close();
    await server?.stop();
  });

  it('counts parts, items and estimated tokens of queued jobs exactly, and parts equal KEDA lag', async () => {
    const texts = ['a', 'short text', 'a somewhat longer text for the estimate', 'x'.repeat(401), 'émoji 🙂 text', 'six', 'seven seven', 'eight'];
    await jobs.submit({ job_id: 'enc', primitive: 'encode', request: { model: TINY_MEAN, items: texts.map((text, i) => ({ id: i, text })) }, part_items: 3 });
    const query = 'which passage?';
    const passages = ['first passage', 'second passage is longer', 'third'];
    await jobs.submit({ job_id: 'sc', primitive: 'score', request: { model: TINY_CROSS, query, items: passages }, part_items: 2 });
    const image = { image: { base64: Buffer.from('not decoded by the backlog').toString('base64') } };
    await jobs.submit({ job_id: 'img', primitive: 'encode', request: { model: 'tiny-clip', items: [image, 'a photo of a cat'] } });

    const { entries, unread } = await backlog.refresh();
    expect(unread).toBe(0);
    expect(entry(entries, 'encode', TINY_MEAN)).toEqual({ primitive: 'encode', model: TINY_MEAN, parts: 3, items: 8, tokens: texts.reduce((n, t) => n + tokensOf(t), 0) });
    expect(entry(entries, 'score', TINY_CROSS)).toEqual({
      primitive: 'score',
      model: TINY_CROSS,
      parts: 2,
      items: 3,
      tokens: passages.reduce((n, p) => n + tokensOf(p) + tokensOf(query), 0),
    });
    expect(entry(entries, 'encode', 'tiny-clip')?.tokens).toBe(IMAGE_TOKENS + tokensOf('a photo of a cat'));

    // The same numbers through Prometheus exposition, and the parts equal to the scaler's lag.
    const metrics = new ShoalMetrics({ processMetrics: false });
    registerBacklogMetrics(metrics, backlog);
    registerBacklogMetrics(metrics, backlog); // a second registration on one registry is a no-op, not a crash
    const text = (await metrics.render()).body;
    expect(sample(text, 'shoal_backlog_tokens', { primitive: 'encode', model: TINY_MEAN })).toBe(texts.reduce((n, t) => n + tokensOf(t), 0));
    expect(sample(text, 'shoal_backlog_items', { primitive: 'score', model: TINY_CROSS })).toBe(3);
    const jsz = await readJsz(server.monitorPort, jobs.topology.names.jobsStream);
    const consumer = jsz?.consumers.find((c) => c.name === jobs.topology.names.consumer('encode', TINY_MEAN));
    expect(consumer === undefined ? null : consumer.num_pending + consumer.num_ack_pending).toBe(3);

    // A worker drains the encode and score work: the series stay, at 0.
    workers.push(await startTestWorker(server.url, prefix, { models: [TINY_MEAN, TINY_CROSS] }));
    expect(await jobs.wait('enc', { timeoutMs: 30_000 })).toMatchObject({ state: 'completed' });
    expect(await jobs.wait('sc', { timeoutMs: 30_000 })).toMatchObject({ state: 'completed' });
    await expect.poll(async () => entry((await backlog.refresh()).entries, 'encode', TINY_MEAN), { timeout: 10_000 }).toEqual({ primitive: 'encode', model: TINY_MEAN, parts: 0, items: 0, tokens: 0 });
    expect(entry((await backlog.refresh()).entries, 'score', TINY_CROSS)?.tokens).toBe(0);
    // Nobody serves tiny-clip here: its part is still owed.
    expect(entry((await backlog.refresh()).entries, 'encode', 'tiny-clip')?.parts).toBe(1);
    for (const worker of workers.splice(0)) await worker.drain();
  }, 60_000);

  it('keeps counting the parts of a worker killed with parts in flight, once each, until another worker acks them', async () => {
    const PARTS = 120;
    const ITEMS_PER_PART = 4;
    const textOf = (i: number): string => `item ${String(i).padStart(4, '0')} of the killed job`;
    const perItem = tokensOf(textOf(0));
    const items = Array.from({ length: PARTS * ITEMS_PER_PART }, (_, i) => ({ id: i, text: textOf(i) }));
    const child = await spawnWorker({ url: server.url, prefix, id: 'doomed', concurrency: 4, ackWaitMs: 3_000 });
    try {
      const deliveriesBefore = (await jobs.topology.jsm.consumers.info(jobs.topology.names.jobsStream, jobs.topology.names.consumer('encode', TINY_MEAN))).delivered.consumer_seq;
      await jobs.submit({ job_id: 'killed', primitive: 'encode', request: { model: TINY_MEAN, items }, part_items: ITEMS_PER_PART });
      const { jsm, names } = jobs.topology;
      const consumer = () => jsm.consumers.info(names.jobsStream, names.consumer('encode', TINY_MEAN));
      await expect.poll(async () => (await jobs.status('killed'))?.parts_done ?? 0, { timeout: 30_000, interval: 20 }).toBeGreaterThanOrEqual(5);
      // Freeze it (no ack can land between the check and the kill) while it holds unacked parts.
      for (;;) {
        child.process.kill('SIGSTOP');
        if ((await consumer()).num_ack_pending > 0) break;
        child.process.kill('SIGCONT');
        await new Promise((wait) => setTimeout(wait, 5));
      }
      child.process.kill('SIGKILL');
      await child.exited;
      const atKill = await consumer();
      expect(atKill.num_ack_pending).toBeGreaterThan(0);
      const lag = atKill.num_pending + atKill.num_ack_pending;
      expect(lag).toBeLessThan(PARTS);
      const afterKill = entry((await backlog.refresh()).entries, 'encode', TINY_MEAN);
      expect(afterKill).toEqual({ primitive: 'encode', model: TINY_MEAN, parts: lag, items: lag * ITEMS_PER_PART, tokens: lag * ITEMS_PER_PART * perItem });

      // Past the ack wait the parts are redelivered to a new worker: the backlog never counts a
      // redelivered part twice (it only falls), and ends at 0 with the job complete.
      workers.push(await startTestWorker(server.url, prefix, { workerId: 'rescuer', consumer: { ackWaitMs: 3_000, maxDeliver: 5 } }));
      const seen: number[] = [];
      const done = jobs.wait('killed', { timeoutMs: 45_000 });
      let finished = false;
      void done.finally(() => (finished = true));
      while (!finished) {
        seen.push(entry((await backlog.refresh()).entries, 'encode', TINY_MEAN)?.parts ?? -1);
        await new Promise((wait) => setTimeout(wait, 50));
      }
      expect(await done).toMatchObject({ state: 'completed', parts_done: PARTS, parts_failed: 0 });
      expect(Math.max(...seen)).toBeLessThanOrEqual(lag);
      expect(seen.every((value, i) => i === 0 || value <= (seen[i - 1] ?? Infinity))).toBe(true);
      await expect.poll(async () => entry((await backlog.refresh()).entries, 'encode', TINY_MEAN)?.tokens, { timeout: 10_000 }).toBe(0);
      // The killed worker's parts came back by redelivery: more deliveries than parts.
      expect((await consumer()).delivered.consumer_seq - deliveriesBefore).toBeGreaterThan(PARTS);
    } finally {
      child.process.kill('SIGKILL');
    }
  }, 60_000);

  it('keeps /metrics serving when NATS is unreachable: the gauges keep their values, the failure is counted', async () => {
    const metrics = new ShoalMetrics({ processMetrics: false });
    registerBacklogMetrics(metrics, backlog);
    const before = (await metrics.render()).body;
    expect(sample(before, 'shoal_backlog_parts', { primitive: 'encode', model: 'tiny-clip' })).toBe(1);
    await server.halt();
    try {
      const during = (await metrics.render()).body;
      expect(sample(during, 'shoal_backlog_parts', { primitive: 'encode', model: 'tiny-clip' })).toBe(1);
      expect(during).toMatch(/^shoal_backlog_refresh_failures_total 1$/m);
    } finally {
      await server.start();
    }
  }, 40_000);
});
