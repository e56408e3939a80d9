import { mkdtempSync, readFileSync, readdirSync, rmSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jetstream } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JobsClient } from '../../adapters/nats/jobs/jobs-client.js';
import { PayloadStore } from '../../adapters/nats/connection/payloads.js';
import { ResultSink } from '../../adapters/nats/results/result-sink.js';
import { StatusStore, initialStatus } from '../../adapters/nats/jobs/status-store.js';
import { hasErrorCode } from '../../adapters/protocol/errors.js';
import { DEAD_LETTER_HEADERS, WIRE_VERSION } from '../../adapters/protocol/jobs.js';
import type { ShoalWorker } from '../../services/worker/worker.js';
import { NATS_SERVER_MISSING, eventually, natsServerAvailable, startNatsServer, type NatsServerHandle } from '../helpers/nats-server.js';
import { TINY_MEAN, encodePart, startTestWorker, testConnection, uniquePrefix } from '../helpers/nats-worker.js';

/**
 * Hostile job messages and job ids against a real worker on a private nats-server:
 * - a forged part whose numbers are absurd (parts 2^35, 2^40, 2^31) is dead-lettered once with
 *   INVALID_INPUT and leaves the jobs stream, without the worker's memory growing;
 * - a job id reused with other content is refused (JOB_CONFLICT) by the jobs client, and a part
 *   of another shape published under an existing id is buried without touching that job;
 * - the same content resubmitted is the same job (idempotent);
 * - a job nobody finishes ends `failed` at its deadline, and a submission abandoned mid-publish
 *   ends visibly after the submit timeout.
 */

function forgedPart(jobId: string, parts: number, part = 0): Record<string, unknown> {
  return { ...encodePart(jobId), part, parts };
}

describe.skipIf(!natsServerAvailable())(`hostile job messages ${natsServerAvailable() ? '' : NATS_SERVER_MISSING}`, () => {
  let server: NatsServerHandle;
  let nc: NatsConnection;
  let worker: ShoalWorker;
  let jobs: JobsClient;
  const prefix = uniquePrefix('hostile');

  beforeAll(async () => {
    server = await startNatsServer();
    worker = await startTestWorker(server.url, prefix, { consumer: { ackWaitMs: 2_000, maxDeliver: 3 } });
    nc = await testConnection(server.url);
    jobs = await JobsClient.open(nc, { topology: { prefix } });
  });

  afterAll(async () => {
    await worker?.drain();
    await nc?.close();
    await server?.stop();
  });

  async function deadLetters(): Promise<{ code: string | undefined; reason: string | undefined; job: string }[]> {
    const names = jobs.topology.names;
    const info = await jobs.topology.jsm.streams.info(names.deadLetterStream);
    const out = [];
    for (let seq = info.state.first_seq; seq <= info.state.last_seq && info.state.messages > 0; seq++) {
      const m = await jobs.topology.jsm.streams.getMessage(names.deadLetterStream, { seq }).catch(() => null);
      if (m === null) continue;
      const body = m.json<{ job_id?: string }>();
      out.push({ code: m.header.get(DEAD_LETTER_HEADERS.code), reason: m.header.get(DEAD_LETTER_HEADERS.reason), job: String(body.job_id) });
    }
    return out;
  }

  async function jobsStreamCount(): Promise<number> {
    const names = jobs.topology.names;
    return (await jobs.topology.jsm.streams.info(names.jobsStream)).state.messages;
  }

  it('dead-letters a part with parts = 2^35 (and 2^40, 2^31) once, removes it, and keeps memory bounded', async () => {
    const js = jetstream(nc);
    const subject = jobs.topology.names.jobs('encode', TINY_MEAN);
    const rssBefore = process.memoryUsage().rss;
    for (const [id, parts] of [
      ['huge35', 2 ** 35],
      ['huge40', 2 ** 40],
      ['huge31', 2 ** 31],
    ] as const) {
      await js.publish(subject, JSON.stringify(forgedPart(id, parts, parts - 1)));
    }
    await eventually(async () => {
      const dead = (await deadLetters()).filter((d) => d.job.startsWith('huge'));
      expect(dead.map((d) => d.job).sort()).toEqual(['huge31', 'huge35', 'huge40']);
      expect(await jobsStreamCount()).toBe(0);
    }, 15_000);
    const dead = (await deadLetters()).filter((d) => d.job.startsWith('huge'));
    for (const d of dead) {
      expect(d.code).toBe('INVALID_INPUT');
      expect(d.reason).toMatch(/parts/);
    }
    // No status was created for them, and nothing is retried: after two ack waits still one dead letter each.
    expect(await jobs.status('huge35')).toBeNull();
    await new Promise((resolve) => setTimeout(resolve, 4_500));
    expect((await deadLetters()).filter((d) => d.job.startsWith('huge'))).toHaveLength(3);
    expect(await jobsStreamCount()).toBe(0);
    const grown = process.memoryUsage().rss - rssBefore;
    console.info(`forged parts 2^31/2^35/2^40: 3 dead letters, jobs stream empty, rss ${grown >= 0 ? '+' : ''}${(grown / 2 ** 20).toFixed(1)} MiB`);
    expect(grown).toBeLessThan(200 * 1024 * 1024);
  }, 40_000);

  it('refuses a job id reused with other content (JOB_CONFLICT) and answers the same content idempotently', async () => {
    const first = await jobs.submit({ job_id: 'reused', primitive: 'encode', request: { model: TINY_MEAN, items: ['a', 'b', 'c'] }, part_items: 2 });
    expect(first).toMatchObject({ parts: 2, items: 3 });
    const again = await jobs.submit({ job_id: 'reused', primitive: 'encode', request: { model: TINY_MEAN, items: [{ text: 'a' }, 'b', 'c'] }, part_items: 2 });
    expect(again).toMatchObject({ job_id: 'reused', parts: 2, items: 3 });
    expect(again.status.created_at).toBe(first.status.created_at);
    const conflict = await jobs.submit({ job_id: 'reused', primitive: 'encode', request: { model: TINY_MEAN, items: ['x', 'y', 'z', 'w'] }, part_items: 2 }).catch((e: unknown) => e);
    expect(hasErrorCode(conflict, 'JOB_CONFLICT')).toBe(true);
    const sameItemsOtherOptions = await jobs
      .submit({ job_id: 'reused', primitive: 'encode', request: { model: TINY_MEAN, items: ['a', 'b', 'c'], normalize: false }, part_items: 2 })
      .catch((e: unknown) => e);
    expect(hasErrorCode(sameItemsOtherOptions, 'JOB_CONFLICT')).toBe(true);
    const status = await jobs.wait('reused', { timeoutMs: 20_000 });
    expect(status).toMatchObject({ state: 'completed', parts: 2, parts_done: 2, items: 3, submitted: true });
    const results = [];
    for await (const r of jobs.results('reused')) results.push(r);
    expect(results.flatMap((r) => (r.result !== undefined && 'items' in r.result ? r.result.items.map((i) => i.index) : []))).toEqual([0, 1, 2]);
  }, 30_000);

  it('buries a part of another shape published under an existing job id, leaving the job alone', async () => {
    const submitted = await jobs.submit({ job_id: 'victim', primitive: 'encode', request: { model: TINY_MEAN, items: ['a'] } });
    const done = await jobs.wait(submitted.job_id, { timeoutMs: 20_000 });
    expect(done.state).toBe('completed');
    await jetstream(nc).publish(jobs.topology.names.jobs('encode', TINY_MEAN), JSON.stringify(forgedPart('victim', 5, 3)));
    await eventually(async () => {
      const dead = (await deadLetters()).filter((d) => d.job === 'victim');
      expect(dead).toHaveLength(1);
      expect(dead[0]?.code).toBe('JOB_CONFLICT');
    });
    expect(await jobs.status('victim')).toMatchObject({ state: 'completed', parts: 1, parts_done: 1, parts_failed: 0 });
  }, 30_000);

  it('ends a job nobody serves at its deadline, and an abandoned submission after the submit timeout', async () => {
    const short = await JobsClient.open(nc, { topology: { prefix }, jobTimeoutMs: 300, submitTimeoutMs: 300 });
    await short.submit({ job_id: 'orphan', primitive: 'encode', request: { model: 'nobody-serves-this', items: ['a'] } });
    const ended = await short.wait('orphan', { timeoutMs: 10_000 });
    expect(ended.state).toBe('failed');
    expect(ended.errors[0]).toMatchObject({ code: 'TIMEOUT' });
    expect(ended.errors[0]?.message).toMatch(/deadline/);

    // A gateway killed mid-submit: the status exists, submitted is still false, some parts never came.
    const store = await StatusStore.open(nc, jobs.topology.names.statusBucket);
    const envelope = { job_id: 'halfway', primitive: 'encode', model: TINY_MEAN, parts: 4, result: { kind: 'stream' } } as const;
    await store.create(initialStatus(envelope, 8, new Date(), { contentHash: 'a'.repeat(64), deadlineAt: new Date(Date.now() + 3_600_000) }));
    expect((await short.status('halfway'))?.state).toBe('queued');
    await new Promise((resolve) => setTimeout(resolve, 400));
    const abandoned = await short.status('halfway');
    expect(abandoned).toMatchObject({ state: 'failed', submitted: false });
    expect(abandoned?.errors[0]?.message).toMatch(/submission never completed/);
  }, 30_000);

  it('ignores a forged max-deliveries advisory for a healthy part that was never delivered', async () => {
    const idle = 'idle-model';
    await jobs.submit({ job_id: 'healthy', primitive: 'encode', request: { model: idle, items: ['a'] } });
    const names = jobs.topology.names;
    const stored = await jobs.topology.jsm.streams.getMessage(names.jobsStream, { last_by_subj: names.jobs('encode', idle) });
    expect(stored).not.toBeNull();
    const advisory = { type: 'io.nats.jetstream.advisory.v1.max_deliver', stream: names.jobsStream, consumer: names.consumer('encode', idle), stream_seq: stored?.seq, deliveries: 5 };
    const advisoriesBefore = (await jobs.topology.jsm.streams.info(`${names.jobsStream}_MAX_DELIVERIES`)).state.last_seq;
    nc.publish(`$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.${names.jobsStream}.${names.consumer('encode', idle)}`, JSON.stringify(advisory));
    // The advisory stream is a work queue: once it is empty, the handler has seen (and refused) it.
    await eventually(async () => {
      const info = await jobs.topology.jsm.streams.info(`${names.jobsStream}_MAX_DELIVERIES`);
      expect(info.state.last_seq).toBe(advisoriesBefore + 1);
      expect(info.state.messages).toBe(0);
    });
    expect((await jobs.status('healthy'))?.state).toBe('queued');
    expect((await deadLetters()).filter((d) => d.job === 'healthy')).toHaveLength(0);
    expect((await jobs.topology.jsm.streams.getMessage(names.jobsStream, { seq: stored?.seq ?? 0 }))?.seq).toBe(stored?.seq);
  }, 30_000);

  it('the sink refuses forged results: for jobs that do not exist, and over a part already written', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'shoal-sink-forged-'));
    const names = jobs.topology.names;
    const sink = new ResultSink({
      js: jetstream(nc),
      topology: jobs.topology,
      payloads: new PayloadStore(nc, { bucket: names.payloadBucket }),
      status: await StatusStore.open(nc, names.statusBucket),
      dir,
      durableName: 'forged_sink_test',
    });
    try {
      await jobs.submit({ job_id: 'sunk', primitive: 'encode', request: { model: TINY_MEAN, items: ['a dog'] } });
      expect((await jobs.wait('sunk', { timeoutMs: 20_000 })).state).toBe('completed');
      await sink.start();
      const file = join(dir, 'sunk', 'part-000000.jsonl');
      await eventually(async () => expect(existsSync(file)).toBe(true));
      const original = readFileSync(file, 'utf8');
      const forged = (jobId: string) => ({
        v: WIRE_VERSION,
        job_id: jobId,
        part: 0,
        parts: 1,
        primitive: 'encode',
        model: TINY_MEAN,
        status: 'ok',
        result: { model: TINY_MEAN, items: [{ index: 0, dense: [6, 6, 6] }], usage: { items: 1, tokens: 1 } },
        worker: 'mallory',
        finished_at: new Date().toISOString(),
      });
      const js = jetstream(nc);
      await js.publish(names.results('sunk', 0), JSON.stringify(forged('sunk')));
      await js.publish(names.results('ghost', 0), JSON.stringify(forged('ghost')));
      await eventually(async () => {
        const info = await jobs.topology.jsm.consumers.info(names.resultsStream, 'forged_sink_test');
        expect(info.num_pending + info.num_ack_pending).toBe(0);
      });
      expect(readFileSync(file, 'utf8')).toBe(original);
      expect(readdirSync(dir)).not.toContain('ghost');
    } finally {
      await sink.drain();
      rmSync(dir, { recursive: true, force: true });
    }
  }, 40_000);

  it('bounds the jobs and results streams by age and bytes (nothing is kept forever)', async () => {
    const names = jobs.topology.names;
    const jobsStream = (await jobs.topology.jsm.streams.info(names.jobsStream)).config;
    const results = (await jobs.topology.jsm.streams.info(names.resultsStream)).config;
    const week = 7 * 86_400 * 1e9;
    // Sized from the server's free store (8 GiB when it holds four times that; stream-sizing.ts), never unbounded.
    const expected = jobs.topology.streamBytes;
    expect(expected.jobs).toBeGreaterThanOrEqual(64 * 1024 ** 2);
    expect(expected.jobs).toBeLessThanOrEqual(8 * 1024 ** 3);
    expect([jobsStream.max_age, jobsStream.max_bytes, jobsStream.discard]).toEqual([week, expected.jobs, 'new']);
    expect([results.max_age, results.max_bytes, results.discard]).toEqual([week, expected.results, 'old']);
  });
});
