import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NatsEngine } from '../../adapters/nats/rpc/engine-client.js';
import { PACKED_FORMAT, PACKED_HEADERS, unpackReply } from '../../adapters/nats/rpc/packed-vectors.js';
import { requestHeaders } from '../../adapters/nats/rpc/rpc-wire.js';
import { RpcReplyEnvelope } from '../../adapters/protocol/jobs.js';
import { EncodeResult } from '../../adapters/protocol/results.js';
import { ErrorCode, ShoalError } from '../../adapters/protocol/errors.js';
import { natsNames } from '../../adapters/protocol/subjects.js';
import type { InferenceEngine } from '../../pipelines/inference/engine.js';
import type { ShoalWorker } from '../../services/worker/worker.js';
import { expectAllClose } from '../helpers/conformance.js';
import { NATS_SERVER_MISSING, natsServerAvailable, startNatsServer, type NatsServerHandle } from '../helpers/nats-server.js';
import { TINY_CROSS, TINY_MEAN, referenceEngine, startTestWorker, testConnection, uniquePrefix } from '../helpers/nats-worker.js';

/**
 * Request-reply against a private nats-server with two workers: `holder` has the embedder
 * resident (preloaded), `spare` serves it too but has not loaded it, and alone serves the
 * cross-encoder. Calls go to the worker holding the model; a model nobody holds is loaded by a
 * serving worker; no responders and timeouts are clear errors.
 */

async function failure(work: Promise<unknown>): Promise<ShoalError> {
  const error: unknown = await work.then(
    () => null,
    (e: unknown) => e,
  );
  if (!(error instanceof ShoalError)) throw new Error(`expected a ShoalError, got ${String(error)}`);
  return error;
}

function residentNames(worker: ShoalWorker): string[] {
  return worker.engine
    .models()
    .models.filter((m) => m.state === 'ready')
    .map((m) => m.name);
}

describe.skipIf(!natsServerAvailable())(`NATS request-reply ${natsServerAvailable() ? '' : NATS_SERVER_MISSING}`, () => {
  let server: NatsServerHandle;
  let nc: NatsConnection;
  let holder: ShoalWorker;
  let spare: ShoalWorker;
  let reference: InferenceEngine;
  let engine: NatsEngine;
  const prefix = uniquePrefix('rpc');

  beforeAll(async () => {
    server = await startNatsServer();
    holder = await startTestWorker(server.url, prefix, { workerId: 'holder', models: [TINY_MEAN], preload: [TINY_MEAN] });
    spare = await startTestWorker(server.url, prefix, { workerId: 'spare', models: [TINY_MEAN, TINY_CROSS] });
    nc = await testConnection(server.url);
    engine = new NatsEngine(nc, { prefix, timeoutMs: 10_000 });
    reference = referenceEngine();
  });

  afterAll(async () => {
    await holder?.drain();
    await spare?.drain();
    await nc?.close();
    await reference?.close();
    await server?.stop();
  });

  it('routes every call to the worker that holds the model, with in-process results', async () => {
    const items = [{ id: 'q', text: 'how do cats purr', role: 'query' as const }, 'the stock market fell'];
    const expected = await reference.encode({ model: TINY_MEAN, items });
    for (let i = 0; i < 8; i++) {
      const started = performance.now();
      const call = await engine.call('encode', { model: TINY_MEAN, items });
      const elapsed = performance.now() - started;
      expect(call).toMatchObject({ worker: 'holder', route: 'resident' });
      // The worker's own time (header Shoal-Worker-Ms) is part of the call's time, never more.
      expect(call.workerMs).toBeGreaterThan(0);
      expect(call.workerMs ?? Number.POSITIVE_INFINITY).toBeLessThan(elapsed);
      expect(call.result.items.map((item) => item.index)).toEqual([0, 1]);
      expect(call.result.items[0]?.id).toBe('q');
      for (const [j, item] of call.result.items.entries()) expectAllClose(item.dense ?? [], expected.items[j]?.dense ?? [], 1e-6, `item ${j}`);
    }
    const viaInterface = await engine.encode({ model: TINY_MEAN, items: ['hello'] });
    expect(viaInterface.usage.items).toBe(1);
    // The spare worker never had to load the model.
    expect(residentNames(spare)).not.toContain(TINY_MEAN);
  });

  it('answers float32-packed vectors to callers that ask for them, plain JSON to the others', async () => {
    const subject = engine.names.resident('encode', TINY_MEAN);
    const body = new TextEncoder().encode(JSON.stringify({ model: TINY_MEAN, items: ['purring cats', 'falling stocks'] }));
    const packed = await nc.request(subject, body, { timeout: 10_000, headers: requestHeaders(10_000) });
    expect(packed.headers?.get(PACKED_HEADERS.body)).toBe(PACKED_FORMAT);
    const plain = await nc.request(subject, body, { timeout: 10_000 });
    expect(plain.headers?.get(PACKED_HEADERS.body) ?? '').toBe('');
    const dense = (value: unknown): number[][] => {
      const reply = RpcReplyEnvelope.parse(value);
      if (!reply.ok) throw new Error('error reply');
      return EncodeResult.parse(reply.result).items.map((item) => item.dense ?? []);
    };
    const fromPacked = dense(unpackReply(packed.data));
    const fromJson = dense(JSON.parse(new TextDecoder().decode(plain.data)));
    expect(fromPacked).toHaveLength(2);
    for (const [i, vector] of fromPacked.entries()) {
      expect(vector.length).toBeGreaterThan(0);
      expectAllClose(vector, fromJson[i] ?? [], 1e-6, `item ${i}`);
    }
    expect(packed.data.byteLength).toBeLessThan(plain.data.byteLength);
  });

  it('falls back to a worker that serves a model nobody holds, which then answers as resident', async () => {
    const request = { model: TINY_CROSS, query: 'purring cats', items: ['cats purr when content', 'stocks fell sharply'] };
    const first = await engine.call('score', request);
    expect(first).toMatchObject({ worker: 'spare', route: 'serving' });
    const second = await engine.call('score', request);
    expect(second).toMatchObject({ worker: 'spare', route: 'resident' });
    const expected = await reference.score(request);
    expect(second.result.scores.map((s) => s.index)).toEqual(expected.scores.map((s) => s.index));
    expectAllClose(
      second.result.scores.map((s) => s.score),
      expected.scores.map((s) => s.score),
      1e-6,
      'scores',
    );
  });

  it('serves tokenize over request-reply, as the in-process engine tokenizes', async () => {
    const request = { model: TINY_MEAN, items: [{ id: 't', text: 'the cat sat on the mat.' }, 'a dog'] };
    const expected = await reference.tokenize(request);
    const result = await engine.tokenize(request);
    expect(result).toEqual(expected);
    expect(result.items[0]?.tokens).toEqual(['[CLS]', 'the', 'cat', 'sat', 'on', 'the', 'mat', '.', '[SEP]']);
    expect(result.items[0]?.id).toBe('t');
    const bad = await failure(engine.tokenize({ model: TINY_MEAN, items: [] }));
    expect(bad.code).toBe(ErrorCode.INVALID_INPUT);
  });

  it('relays worker-side errors with their code', async () => {
    const error = await failure(engine.encode({ model: TINY_MEAN, items: ['x'], output_types: ['sparse'] }));
    expect(error.code).toBe(ErrorCode.UNSUPPORTED_OPERATION);
    expect(error.message).toMatch(/cannot encode sparse/);
  });

  it('turns no responders for an unknown model into MODEL_NOT_FOUND listing the served models', async () => {
    const error = await failure(engine.encode({ model: 'nobody/serves-this', items: ['x'] }));
    expect(error.code).toBe(ErrorCode.MODEL_NOT_FOUND);
    expect(error.message).toContain('no worker serves model "nobody/serves-this" for encode');
    expect(error.details?.served).toEqual(expect.arrayContaining([TINY_MEAN]));
    // A served model asked for a primitive its family lacks: nobody subscribes, and that is unsupported, not an outage.
    expect((await failure(engine.extract({ model: TINY_MEAN, items: ['x'] }))).code).toBe(ErrorCode.UNSUPPORTED_OPERATION);
  });

  it('turns a worker that never answers into TIMEOUT', async () => {
    const silent = nc.subscribe(natsNames(prefix).resident('encode', 'silent/model'), { callback: () => undefined });
    await nc.flush();
    const quick = new NatsEngine(nc, { prefix, timeoutMs: 300 });
    const error = await failure(quick.encode({ model: 'silent/model', items: ['x'] }));
    silent.unsubscribe();
    expect(error.code).toBe(ErrorCode.TIMEOUT);
    expect(error.message).toMatch(/no worker answered encode on model "silent\/model" within 300 ms/);
  });

  it('refuses a request over the message limit before sending it', async () => {
    const small = new NatsEngine(nc, { prefix, maxMessageBytes: 1000 });
    const error = await failure(small.encode({ model: TINY_MEAN, items: ['x'.repeat(2000)] }));
    expect(error.code).toBe(ErrorCode.INPUT_TOO_LARGE);
  });

  it('lists the workers with what they serve and hold', async () => {
    const workers = (await engine.workers(300)).sort((a, b) => a.worker.localeCompare(b.worker));
    expect(workers.map((w) => w.worker)).toEqual(['holder', 'spare']);
    expect(workers[0]).toMatchObject({ serves: [TINY_MEAN], resident: [TINY_MEAN] });
    expect(workers[1]?.serves).toEqual([TINY_MEAN, TINY_CROSS]);
    expect(workers[1]?.resident).toEqual([TINY_CROSS]);
    // The primitives per model: what a gateway checks a job's operation against at submit.
    expect(workers[1]?.operations).toEqual({ [TINY_MEAN]: ['encode', 'score'], [TINY_CROSS]: ['score'] });
    // Done once no answer has come for 100 ms after the first, not after the whole 1.5 s wait.
    const started = performance.now();
    expect((await engine.workers(1_500, 100)).map((w) => w.worker).sort()).toEqual(['holder', 'spare']);
    expect(performance.now() - started).toBeLessThan(1_200);
  });
});
