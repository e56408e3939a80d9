import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { jetstream } from '@nats-io/jetstream';
import { Objm } from '@nats-io/obj';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JobsClient } from '../../adapters/nats/jobs/jobs-client.js';
import { PACKED_FORMAT, PACKED_HEADERS, unpackReply } from '../../adapters/nats/rpc/packed-vectors.js';
import { ensureJobConsumer } from '../../adapters/nats/connection/topology.js';
import { EncodeResult, ScoreResult } from '../../adapters/protocol/results.js';
import { JobPartResult, WIRE_VERSION } from '../../adapters/protocol/jobs.js';
import type { InferenceEngine } from '../../pipelines/inference/engine.js';
import type { ShoalWorker } from '../../services/worker/worker.js';
import { expectAllClose } from '../helpers/conformance.js';
import { NATS_SERVER_MISSING, eventually, natsServerAvailable, startNatsServer, type NatsServerHandle } from '../helpers/nats-server.js';
import { jsonl, runShoal } from '../helpers/shoal-cli.js';
import { TINY_CROSS, TINY_MEAN, emptyEncodePart, referenceEngine, startTestWorker, testConnection, uniquePrefix } from '../helpers/nats-worker.js';

/**
 * Jobs end to end against a private nats-server: a worker on the fixture models, jobs submitted
 * through JobsClient, results compared with the in-process engine on the same items.
 */

const TEXTS = Array.from({ length: 10 }, (_, i) => `sentence number ${i} about ${i % 2 === 0 ? 'cats' : 'the stock market'}`);

describe.skipIf(!natsServerAvailable())(`NATS jobs ${natsServerAvailable() ? '' : NATS_SERVER_MISSING}`, () => {
  let server: NatsServerHandle;
  let nc: NatsConnection;
  let worker: ShoalWorker;
  let reference: InferenceEngine;
  const prefix = uniquePrefix('jobs');
  const storeDir = mkdtempSync(join(tmpdir(), 'shoal-results-'));

  beforeAll(async () => {
    server = await startNatsServer();
    worker = await startTestWorker(server.url, prefix, { models: [TINY_MEAN, TINY_CROSS], fileRoots: [storeDir] });
    nc = await testConnection(server.url);
    reference = referenceEngine();
  });

  afterAll(async () => {
    await worker?.drain();
    await nc?.close();
    await reference?.close();
    await server?.stop();
    rmSync(storeDir, { recursive: true, force: true });
  });

  it('runs an encode job split into parts: results published, status completed, vectors as in-process', async () => {
    const jobs = await JobsClient.open(nc, { topology: { prefix } });
    const items = TEXTS.map((text, i) => ({ id: `doc-${i}`, text }));
    const submitted = await jobs.submit({ primitive: 'encode', request: { model: TINY_MEAN, items }, part_items: 3 });
    expect(submitted.parts).toBe(4);
    expect(submitted.items).toBe(10);

    // Each status seen on the way is told (a documents worker's progress clock): parts done only grow, the last is the answer.
    const seen: number[] = [];
    const status = await jobs.wait(submitted.job_id, { timeoutMs: 30_000, onStatus: (update) => seen.push(update.parts_done) });
    expect(status).toMatchObject({ state: 'completed', parts: 4, parts_done: 4, parts_failed: 0, items: 10, errors: [] });
    expect(seen.at(-1)).toBe(4);
    expect(seen).toEqual([...seen].sort((a, b) => a - b));

    const results = [];
    for await (const part of jobs.results(submitted.job_id)) results.push(part);
    expect(results.map((r) => r.part)).toEqual([0, 1, 2, 3]);
    expect(results.every((r) => r.status === 'ok' && r.v === WIRE_VERSION && r.worker === worker.id)).toBe(true);
    const encoded = results.flatMap((r) => EncodeResult.parse(r.result).items);
    expect(encoded.map((item) => item.index)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    expect(encoded.map((item) => item.id)).toEqual(items.map((item) => item.id));

    const expected = await reference.encode({ model: TINY_MEAN, items });
    for (const [i, item] of encoded.entries()) expectAllClose(item.dense ?? [], expected.items[i]?.dense ?? [], 1e-6, `item ${i}`);
  });

  it('publishes part results with float32-packed vectors by default, JSON numbers when the job asks', async () => {
    const jobs = await JobsClient.open(nc, { topology: { prefix } });
    const items = TEXTS.slice(0, 4);
    const packed = await jobs.submit({ primitive: 'encode', request: { model: TINY_MEAN, items } });
    const plain = await jobs.submit({ primitive: 'encode', request: { model: TINY_MEAN, items }, result: { kind: 'stream', vectors: 'json' } });
    await jobs.wait(packed.job_id, { timeoutMs: 30_000 });
    await jobs.wait(plain.job_id, { timeoutMs: 30_000 });
    const { jsm, names } = jobs.topology;
    const raw = async (jobId: string) => {
      const stored = await jsm.streams.getMessage(names.resultsStream, { last_by_subj: names.results(jobId, 0) });
      if (stored === null) throw new Error(`no result for ${jobId}`);
      return stored;
    };
    const packedMessage = await raw(packed.job_id);
    const plainMessage = await raw(plain.job_id);
    expect(packedMessage.header?.get(PACKED_HEADERS.body)).toBe(PACKED_FORMAT);
    expect(plainMessage.header?.get(PACKED_HEADERS.body) ?? '').toBe('');
    // 4 bytes per float instead of ~19 characters per number.
    expect(packedMessage.data.byteLength).toBeLessThan(plainMessage.data.byteLength);
    const fromPacked = EncodeResult.parse(JobPartResult.parse(unpackReply(packedMessage.data)).result).items;
    const fromJson = EncodeResult.parse(JobPartResult.parse(plainMessage.json()).result).items;
    expect(fromPacked).toHaveLength(4);
    for (const [i, item] of fromPacked.entries()) expectAllClose(item.dense ?? [], fromJson[i]?.dense ?? [], 1e-6, `item ${i}`);
    // Readers decode either form: the client's results() gives the same vectors.
    const viaClient = [];
    for await (const part of jobs.results(packed.job_id)) viaClient.push(...EncodeResult.parse(part.result).items);
    expect(viaClient.map((item) => item.dense)).toEqual(fromPacked.map((item) => item.dense));
    const status = await jobs.status(plain.job_id);
    expect(status?.result).toEqual({ kind: 'stream', vectors: 'json' });
  });

  it('runs a score job: indexes cover the whole request and scores match in-process', async () => {
    const jobs = await JobsClient.open(nc, { topology: { prefix } });
    const request = { model: TINY_CROSS, query: 'which animals purr', items: TEXTS };
    const submitted = await jobs.submit({ primitive: 'score', request, part_items: 4 });
    const status = await jobs.wait(submitted.job_id, { timeoutMs: 30_000 });
    expect(status).toMatchObject({ state: 'completed', parts: 3, parts_done: 3 });
    const scores = [];
    for await (const part of jobs.results(submitted.job_id)) scores.push(...ScoreResult.parse(part.result).scores);
    scores.sort((a, b) => a.index - b.index);
    expect(scores.map((s) => s.index)).toEqual([...TEXTS.keys()]);
    const expected = (await reference.score(request)).scores.sort((a, b) => a.index - b.index);
    expectAllClose(
      scores.map((s) => s.score),
      expected.map((s) => s.score),
      1e-6,
      'scores',
    );
  });

  it('sends parts over the message limit by reference through the object store', async () => {
    const jobs = await JobsClient.open(nc, { topology: { prefix }, maxMessageBytes: 4096 + 600 });
    const items = TEXTS.map((text) => ({ text: `${text} ${'padding '.repeat(40)}` }));
    const submitted = await jobs.submit({ primitive: 'encode', request: { model: TINY_MEAN, items }, part_items: 5 });
    const status = await jobs.wait(submitted.job_id, { timeoutMs: 30_000 });
    expect(status).toMatchObject({ state: 'completed', parts_done: 2 });
    const store = await new Objm(nc).open(jobs.topology.names.payloadBucket);
    const stored = await store.getBlob(`jobs/${submitted.job_id}/0.json`);
    expect(stored).not.toBeNull();
    const expected = await reference.encode({ model: TINY_MEAN, items });
    const encoded = [];
    for await (const part of jobs.results(submitted.job_id)) encoded.push(...EncodeResult.parse(part.result).items);
    for (const [i, item] of encoded.entries()) expectAllClose(item.dense ?? [], expected.items[i]?.dense ?? [], 1e-6, `item ${i}`);
  });

  it('writes results to a file:// store target and publishes references', async () => {
    const jobs = await JobsClient.open(nc, { topology: { prefix }, fileRoots: [storeDir] });
    const uri = `file://${storeDir}/out`;
    const submitted = await jobs.submit({ primitive: 'encode', request: { model: TINY_MEAN, items: TEXTS.slice(0, 4) }, part_items: 2, result: { kind: 'store', uri } });
    await jobs.wait(submitted.job_id, { timeoutMs: 30_000 });
    const first = await jobs.partResult(submitted.job_id, 1, false);
    expect(first?.result).toBeUndefined();
    expect(first?.result_ref).toBe(`${uri}/${submitted.job_id}/part-1.jsonl`);
    const file = EncodeResult.parse(JSON.parse(readFileSync(fileURLToPath(first?.result_ref ?? ''), 'utf8')));
    expect(file.items.map((item) => item.index)).toEqual([2, 3]);
    const resolved = await jobs.partResult(submitted.job_id, 1);
    expect(EncodeResult.parse(resolved?.result)).toEqual(file);
  });

  it('answers invalid input in a part with an error result, term() and a failed status', async () => {
    const jobs = await JobsClient.open(nc, { topology: { prefix } });
    const names = jobs.topology.names;
    await jetstream(nc).publish(names.jobs('encode', TINY_MEAN), JSON.stringify(emptyEncodePart('bad-input-job')));
    const status = await jobs.wait('bad-input-job', { timeoutMs: 30_000 });
    expect(status).toMatchObject({ state: 'failed', parts_done: 0, parts_failed: 1 });
    expect(status.errors[0]).toMatchObject({ code: 'INVALID_INPUT', part: 0 });
    expect(status.errors[0]?.message).toMatch(/items must not be empty/);
    const result = await jobs.partResult('bad-input-job', 0);
    expect(result).toMatchObject({ status: 'error', error: { code: 'INVALID_INPUT' } });
    await eventually(async () => {
      const consumer = await jobs.topology.jsm.consumers.info(names.jobsStream, names.consumer('encode', TINY_MEAN));
      expect(consumer.num_pending + consumer.num_ack_pending).toBe(0);
    });
    const dead = await jobs.topology.jsm.streams.info(names.deadLetterStream);
    expect(dead.state.messages).toBe(0);
  });

  it("refuses payload references outside the worker's file roots", async () => {
    const jobs = await JobsClient.open(nc, { topology: { prefix } });
    const part = {
      v: WIRE_VERSION,
      job_id: 'outside-roots',
      part: 0,
      parts: 1,
      primitive: 'encode',
      model: TINY_MEAN,
      payload_ref: 'file:///etc/hostname',
      result: { kind: 'stream' },
      submitted_at: new Date().toISOString(),
    };
    await jetstream(nc).publish(jobs.topology.names.jobs('encode', TINY_MEAN), JSON.stringify(part));
    const status = await jobs.wait('outside-roots', { timeoutMs: 30_000 });
    expect(status.state).toBe('failed');
    expect(status.errors[0]).toMatchObject({ code: 'INVALID_INPUT' });
    expect(status.errors[0]?.message).toContain('/etc/hostname is outside the allowed file roots');
  });

  it('refuses, without reading them, payload references inside the roots to a named pipe or to a file over the size limit', async () => {
    const jobs = await JobsClient.open(nc, { topology: { prefix } });
    const fifo = join(storeDir, 'pipe.json');
    execFileSync('mkfifo', [fifo]);
    const huge = join(storeDir, 'huge.json');
    writeFileSync(huge, '');
    truncateSync(huge, 513 * 1024 * 1024); // sparse: no disk used
    for (const [jobId, path, code] of [['fifo-ref', fifo, 'INVALID_INPUT'], ['huge-ref', huge, 'INPUT_TOO_LARGE']] as const) {
      const part = { v: WIRE_VERSION, job_id: jobId, part: 0, parts: 1, primitive: 'encode', model: TINY_MEAN, payload_ref: `file://${path}`, result: { kind: 'stream' }, submitted_at: new Date().toISOString() };
      await jetstream(nc).publish(jobs.topology.names.jobs('encode', TINY_MEAN), JSON.stringify(part));
      const status = await jobs.wait(jobId, { timeoutMs: 15_000 });
      expect(status.state).toBe('failed');
      expect(status.errors[0]).toMatchObject({ code });
    }
    rmSync(fifo);
    rmSync(huge);
  });

  it('makes resubmission with the same job id publish nothing new', async () => {
    const jobs = await JobsClient.open(nc, { topology: { prefix } });
    const submission = { job_id: 'same-id', primitive: 'encode', request: { model: TINY_MEAN, items: TEXTS.slice(0, 3) }, part_items: 1 } as const;
    await jobs.submit(submission);
    await jobs.wait('same-id', { timeoutMs: 30_000 });
    const before = await jobs.topology.jsm.streams.info(jobs.topology.names.jobsStream);
    const again = await jobs.submit(submission);
    expect(again.status.state).toBe('completed');
    const after = await jobs.topology.jsm.streams.info(jobs.topology.names.jobsStream);
    expect(after.state.last_seq).toBe(before.state.last_seq);
  });

  it('shoal submit publishes a job from JSON Lines and --wait prints the final status', async () => {
    const lines = jsonl(TEXTS.slice(0, 5).map((text, i) => ({ id: i, text })));
    const run = await runShoal(['submit', 'encode', '--model', TINY_MEAN, '--nats', server.url, '--prefix', prefix, '--job-id', 'from-cli', '--part-items', '2', '--wait'], {
      stdin: lines,
    });
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    expect(JSON.parse(run.stdout)).toMatchObject({ job_id: 'from-cli', state: 'completed', parts: 3, parts_done: 3, items: 5 });
    const jobs = await JobsClient.open(nc, { topology: { prefix } });
    const ids = [];
    for await (const part of jobs.results('from-cli')) ids.push(...EncodeResult.parse(part.result).items.map((item) => item.id));
    expect(ids).toEqual([0, 1, 2, 3, 4]);
  });

  it('shoal submit refuses a model no worker serves or served, and queues one whose workers are away', async () => {
    const refused = await runShoal(['submit', 'score', '--model', 'nobody/serves-this', '--query', 'q', '--nats', server.url, '--prefix', prefix, '--job-id', 'refused-cli'], {
      stdin: jsonl([{ text: 'a' }]),
    });
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('error [MODEL_NOT_FOUND]');
    expect(refused.stderr).toContain(TINY_MEAN);
    // A worker served the model before (its consumer exists): the job waits for the next one (KEDA scales from zero).
    const jobs = await JobsClient.open(nc, { topology: { prefix } });
    await ensureJobConsumer(jobs.topology, 'score', 'away/for-now');
    const run = await runShoal(['submit', 'score', '--model', 'away/for-now', '--query', 'q', '--nats', server.url, '--prefix', prefix, '--job-id', 'queued-cli'], {
      stdin: jsonl([{ text: 'a' }]),
    });
    expect(run.code).toBe(0);
    expect(JSON.parse(run.stdout)).toEqual({ job_id: 'queued-cli', parts: 1, items: 1, state: 'queued' });
  });
});
