import { jetstream, jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import { Kvm, type KV } from '@nats-io/kv';
import { headers as natsHeaders, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DeadLetters } from '../../adapters/nats/jobs/dead-letter.js';
import { PartResults } from '../../adapters/nats/jobs/part-results.js';
import { PayloadStore } from '../../adapters/nats/connection/payloads.js';
import { StatusStore } from '../../adapters/nats/jobs/status-store.js';
import { ensureTopology } from '../../adapters/nats/connection/topology.js';
import { ErrorCode, ShoalError } from '../../adapters/protocol/errors.js';
import type { ShoalWorker } from '../../services/worker/worker.js';
import { NATS_SERVER_MISSING, eventually, natsServerAvailable, startNatsServer, type NatsServerHandle } from '../helpers/nats-server.js';
import { TINY_MEAN, startTestWorker, testConnection, uniquePrefix } from '../helpers/nats-worker.js';

/**
 * The NATS wire contract of docs/nats.md as a client in another language sees it: raw JSON on
 * the documented subjects, names spelled out from the docs (prefix-derived stream, bucket and
 * subject names), no Shoal client code. A real worker on a private nats-server:
 * - request-reply: the reply envelope, `Shoal-Worker-Ms`, the error shape, no `v` in requests,
 *   no responders for a model nobody serves, the float32-packed layout;
 * - jobs: a part published twice with the same `Nats-Msg-Id` runs once, its result on
 *   `<prefix>.results.<job>.<part>` (same message id), the status in `<prefix>_jobs`;
 * - a part whose job id's KV entry is not a job status is dead-lettered once (JOB_CONFLICT), not
 *   retried until it runs out of deliveries, and the entry is left as it was; the max-deliveries
 *   path (DeadLetters.settle) buries such a part the same way instead of failing on every advisory.
 */

const enc = (value: unknown): Uint8Array => Buffer.from(JSON.stringify(value), 'utf8');

describe.skipIf(!natsServerAvailable())(`a foreign client on the documented wire ${natsServerAvailable() ? '' : NATS_SERVER_MISSING}`, () => {
  let server: NatsServerHandle;
  let nc: NatsConnection;
  let jsm: JetStreamManager;
  let kv: KV;
  let worker: ShoalWorker;
  const prefix = uniquePrefix('foreign');
  // docs/nats.md, Topology: names derive from the prefix.
  const STREAM = prefix.toUpperCase();
  // tiny-bert-mean is its own model token (letters, digits and '-' stay).
  const encodeSubject = `${prefix}.rpc.serving.encode.${TINY_MEAN}`;
  const jobsSubject = `${prefix}.jobs.encode.${TINY_MEAN}`;

  beforeAll(async () => {
    server = await startNatsServer();
    worker = await startTestWorker(server.url, prefix, { consumer: { ackWaitMs: 1_000, maxDeliver: 3 } });
    nc = await testConnection(server.url);
    jsm = await jetstreamManager(nc);
    kv = await new Kvm(nc).open(`${prefix}_jobs`);
  });

  afterAll(async () => {
    await worker?.drain();
    await nc?.close();
    await server?.stop();
  });

  async function deadLetters(job: string): Promise<{ code: string; msgId: string; subject: string }[]> {
    const info = await jsm.streams.info(`${STREAM}_DLQ`);
    const out = [];
    for (let seq = info.state.first_seq; info.state.messages > 0 && seq <= info.state.last_seq; seq++) {
      const m = await jsm.streams.getMessage(`${STREAM}_DLQ`, { seq });
      if (m !== null && m.header.get('Shoal-Original-Msg-Id').startsWith(`${job}.`)) {
        out.push({ code: m.header.get('Shoal-Dead-Code'), msgId: m.header.get('Shoal-Original-Msg-Id'), subject: m.subject });
      }
    }
    return out;
  }

  /** A status a client of its own wrote without parts_done, parts_failed and errors. */
  async function writeBadStatus(job: string, now: string): Promise<string> {
    const written = JSON.stringify({ v: 1, job_id: job, state: 'queued', primitive: 'encode', model: TINY_MEAN, parts: 1, items: 1, result: { kind: 'stream' }, created_at: now, updated_at: now });
    await kv.create(job, written);
    return written;
  }

  async function resultCount(job: string): Promise<number> {
    const results = await jsm.streams.info(`${STREAM}_RESULTS`, { subjects_filter: `${prefix}.results.${job}.>` });
    return Object.values(results.state.subjects ?? {}).reduce((a, b) => a + b, 0);
  }

  it('answers raw request-reply calls with the documented envelope, headers and errors', async () => {
    const ok = await nc.request(encodeSubject, enc({ model: TINY_MEAN, items: ['a query', { id: 'd1', text: 'a document' }] }), { timeout: 30_000 });
    expect(Number(ok.headers?.get('Shoal-Worker-Ms'))).toBeGreaterThan(0);
    const reply = ok.json<{ ok: boolean; worker: string; result: { model: string; items: { index: number; id?: string; dense: number[] }[] } }>();
    expect(reply.ok).toBe(true);
    expect(reply.worker).toBe(worker.id);
    expect(reply.result.items.map((item) => [item.index, item.id])).toEqual([
      [0, undefined],
      [1, 'd1'],
    ]);
    const dense = reply.result.items[0]?.dense ?? [];
    expect(dense.length).toBeGreaterThan(0);

    const tokens = await nc.request(`${prefix}.rpc.serving.tokenize.${TINY_MEAN}`, enc({ model: TINY_MEAN, items: [{ id: 't', text: 'hello world', pair: 'x' }] }), { timeout: 10_000 });
    expect(tokens.json()).toMatchObject({ ok: true, result: { model: TINY_MEAN, items: [{ index: 0, id: 't', truncated: false }] } });
    const answers = [];
    for await (const answer of await nc.requestMany(`${prefix}.rpc.workers`, new Uint8Array(0), { maxWait: 500 })) answers.push(answer.json());
    expect(answers).toEqual([{ v: 1, worker: worker.id, serves: [TINY_MEAN], resident: [TINY_MEAN], operations: { [TINY_MEAN]: ['encode', 'score'] } }]);

    // Float32-packed on request: uint32 LE length L, L bytes of JSON, zero padding to 4, float32 LE values.
    const h = natsHeaders();
    h.set('Shoal-Accept', 'f32-v1');
    const packed = await nc.request(`${prefix}.rpc.resident.encode.${TINY_MEAN}`, enc({ model: TINY_MEAN, items: ['a query'] }), { timeout: 10_000, headers: h });
    expect(packed.headers?.get('Shoal-Body')).toBe('f32-v1');
    const body = Buffer.from(packed.data);
    const length = body.readUInt32LE(0);
    const envelope = JSON.parse(body.subarray(4, 4 + length).toString('utf8')) as { result: { items: { dense: { $f32: [number, number] } }[] } };
    const [start, count] = envelope.result.items[0]?.dense.$f32 ?? [0, 0];
    const floats = 4 + Math.ceil(length / 4) * 4;
    const values = Array.from({ length: count }, (_, i) => body.readFloatLE(floats + (start + i) * 4));
    expect(values).toHaveLength(dense.length);
    values.forEach((value, i) => expect(value).toBeCloseTo(dense[i] ?? Number.NaN, 6));

    // Errors: {ok: false, error: {code, message, details?, cause?}, worker}, still with Shoal-Worker-Ms.
    for (const [body, pattern] of [
      ['{not json', /not JSON/],
      [JSON.stringify({ v: 1, model: TINY_MEAN, items: ['x'] }), /Unrecognized key: "v"/],
      [JSON.stringify({ model: 'tiny-ner', items: ['x'] }), /names model "tiny-ner"/],
    ] as const) {
      const failed = await nc.request(encodeSubject, Buffer.from(body), { timeout: 10_000 });
      expect(failed.headers?.get('Shoal-Worker-Ms')).toBeDefined();
      const error = failed.json<{ ok: boolean; error: { code: string; message: string }; worker: string }>();
      expect(error).toMatchObject({ ok: false, error: { code: 'INVALID_INPUT' }, worker: worker.id });
      expect(error.error.message).toMatch(pattern);
    }
    const timeoutHeader = natsHeaders();
    timeoutHeader.set('Shoal-Timeout-Ms', '1');
    const late = await nc.request(encodeSubject, enc({ model: TINY_MEAN, items: Array.from({ length: 64 }, (_, i) => `text ${i} `.repeat(40)) }), { timeout: 10_000, headers: timeoutHeader });
    expect(late.json()).toMatchObject({ ok: false, error: { code: 'TIMEOUT' } });

    // A model (or an operation of a model) no worker serves: NATS's own "no responders", no Shoal reply.
    for (const subject of [`${prefix}.rpc.serving.encode.nobody-serves-this`, `${prefix}.rpc.serving.extract.${TINY_MEAN}`]) {
      const none = await nc.request(subject, enc({ model: TINY_MEAN, items: ['x'] }), { timeout: 5_000 }).then(
        () => 'answered',
        (error: unknown) => (error instanceof Error ? error.message : String(error)),
      );
      expect(none).toMatch(/no responders/);
    }
  }, 60_000);

  it('runs a raw job part once when it is published twice with the same Nats-Msg-Id', async () => {
    const job = 'raw-job';
    const now = new Date().toISOString();
    const status = { v: 1, job_id: job, state: 'queued', primitive: 'encode', model: TINY_MEAN, parts: 1, parts_done: 0, parts_failed: 0, items: 2, errors: [], result: { kind: 'stream', vectors: 'json' }, created_at: now, updated_at: now };
    await kv.create(job, JSON.stringify(status));
    const part = { v: 1, job_id: job, part: 0, parts: 1, primitive: 'encode', model: TINY_MEAN, request: { model: TINY_MEAN, items: ['a', 'b'] }, offset: 0, result: { kind: 'stream', vectors: 'json' }, submitted_at: now };
    const js = jetstream(nc);
    const first = await js.publish(jobsSubject, enc(part), { msgID: `${job}.0` });
    const second = await js.publish(jobsSubject, enc(part), { msgID: `${job}.0` });
    expect([first.duplicate, second.duplicate, second.seq]).toEqual([false, true, first.seq]);
    await eventually(async () => {
      expect((await kv.get(job))?.json()).toMatchObject({ state: 'completed', parts_done: 1, parts_failed: 0, items: 2 });
    }, 20_000);
    const stored = await jsm.streams.getMessage(`${STREAM}_RESULTS`, { last_by_subj: `${prefix}.results.${job}.0` });
    expect(stored?.header.get('Nats-Msg-Id')).toBe(`${job}.0`);
    expect(stored?.header.get('Shoal-Body')).toBe('');
    expect(stored?.json()).toMatchObject({ v: 1, job_id: job, part: 0, parts: 1, status: 'ok', worker: worker.id, result: { items: [{ index: 0 }, { index: 1 }] } });
    const results = await jsm.streams.info(`${STREAM}_RESULTS`, { subjects_filter: `${prefix}.results.${job}.>` });
    expect(results.state.subjects).toEqual({ [`${prefix}.results.${job}.0`]: 1 });
  }, 40_000);

  it('dead-letters once, with JOB_CONFLICT, a part whose job id holds no job status, and leaves that entry alone', async () => {
    const job = 'bad-status';
    const now = new Date().toISOString();
    const written = await writeBadStatus(job, now);
    const part = { v: 1, job_id: job, part: 0, parts: 1, primitive: 'encode', model: TINY_MEAN, request: { model: TINY_MEAN, items: ['a'] }, result: { kind: 'stream' }, submitted_at: now };
    await jetstream(nc).publish(jobsSubject, enc(part), { msgID: `${job}.0` });
    await eventually(async () => {
      expect(await deadLetters(job)).toEqual([{ code: 'JOB_CONFLICT', msgId: `${job}.0`, subject: `${prefix}.dlq.encode.${TINY_MEAN}` }]);
      expect((await jsm.streams.info(`${STREAM}_JOBS`)).state.messages).toBe(0);
    }, 15_000);
    // Terminated at once (it used to wait for redeliveries, failing on each): nothing pending, no result.
    const consumer = await jsm.consumers.info(`${STREAM}_JOBS`, `${prefix}_encode_${TINY_MEAN}`);
    expect([consumer.num_pending, consumer.num_ack_pending, consumer.num_redelivered]).toEqual([0, 0, 0]);
    expect((await kv.get(job))?.string()).toBe(written);
    expect(await resultCount(job)).toBe(0);
  }, 40_000);

  it('buries such a part from the max-deliveries path too, with JOB_CONFLICT and no result', async () => {
    const job = 'bad-status-advisory';
    const now = new Date().toISOString();
    const written = await writeBadStatus(job, now);
    const topology = await ensureTopology(nc, { prefix });
    const status = await StatusStore.open(nc, topology.names.statusBucket);
    const payloads = new PayloadStore(nc, { bucket: topology.names.payloadBucket });
    const js = jetstream(nc);
    const results = new PartResults({ js, jsm, names: topology.names, payloads, status, workerId: 'advisory-test', maxMessageBytes: 1024 * 1024 });
    const dead = new DeadLetters({ js, jsm, names: topology.names, results, status });
    const part = { v: 1, job_id: job, part: 0, parts: 1, primitive: 'encode', model: TINY_MEAN, request: { model: TINY_MEAN, items: ['a'] }, result: { kind: 'stream' }, submitted_at: now };
    const h = natsHeaders();
    h.set('Nats-Msg-Id', `${job}.0`);
    // What the advisory handler hands over: the part read back by sequence after max_deliver.
    const source = { subject: jobsSubject, data: enc(part), headers: h, seq: 999_999, deliveries: 3 };
    const outcome = await dead.settle(source, new ShoalError(ErrorCode.TIMEOUT, 'delivered 3 times without an ack'));
    expect(outcome).toBe('buried');
    expect(await deadLetters(job)).toEqual([{ code: 'JOB_CONFLICT', msgId: `${job}.0`, subject: `${prefix}.dlq.encode.${TINY_MEAN}` }]);
    expect((await kv.get(job))?.string()).toBe(written);
    expect(await resultCount(job)).toBe(0);
  }, 20_000);
});
