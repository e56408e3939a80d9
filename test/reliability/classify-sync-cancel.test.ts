import { setImmediate as tick } from 'node:timers/promises';
import type { FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import type { CallOptions, Engine } from '../../adapters/protocol/engine.js';
import { ErrorCode, ShoalError } from '../../adapters/protocol/errors.js';
import type { EncodeRequest } from '../../adapters/protocol/requests.js';
import type { EncodeResult } from '../../adapters/protocol/results.js';
import { MAX_SYNC_TAXONOMY_CATEGORIES } from '../../services/gateway/routes/classify.js';
import { ErrorBody, localGateway } from '../helpers/gateway.js';

/**
 * Issue 42 item 13. A synchronous POST /v1/classify whose category matrix takes longer than the
 * request timeout answered 504, and the build went on embedding every category for nobody (for
 * minutes with a real taxonomy). Now the route's deadline aborts the build when no other request
 * waits for it, and a taxonomy over MAX_SYNC_TAXONOMY_CATEGORIES is not built synchronously at
 * all: a job in mode "auto", 413 naming `taxonomy` in mode "sync". The engine is a stub whose
 * encode calls take SLOW_MS each unless their signal aborts, so which calls ran is known exactly.
 */

const SLOW_MS = 400;
const TIMEOUT_MS = 150;
const DIM = 4;

interface EncodeCall {
  items: number;
  aborted: boolean;
  settled: Promise<void>;
}

class SlowEngine implements Engine {
  readonly calls: EncodeCall[] = [];

  encode(request: EncodeRequest, options: CallOptions = {}): Promise<EncodeResult> {
    let settle = (): void => undefined;
    const call: EncodeCall = { items: request.items.length, aborted: false, settled: new Promise<void>((resolve) => (settle = resolve)) };
    this.calls.push(call);
    return new Promise<EncodeResult>((resolve, reject) => {
      const timer = setTimeout(() => {
        options.signal?.removeEventListener('abort', onAbort);
        settle();
        resolve({ model: request.model, items: request.items.map((_item, index) => ({ index, dense: Array.from({ length: DIM }, (_v, d) => (d === index % DIM ? 1 : 0.1)) })), usage: { items: request.items.length, tokens: 0 } });
      }, SLOW_MS);
      const onAbort = (): void => {
        clearTimeout(timer);
        call.aborted = true;
        settle();
        reject(new ShoalError(ErrorCode.CANCELLED, 'aborted'));
      };
      if (options.signal?.aborted === true) onAbort();
      else options.signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  score(): never {
    throw new ShoalError(ErrorCode.UNSUPPORTED_OPERATION, 'not in this test');
  }

  extract(): never {
    throw new ShoalError(ErrorCode.UNSUPPORTED_OPERATION, 'not in this test');
  }

  tokenize(): never {
    throw new ShoalError(ErrorCode.UNSUPPORTED_OPERATION, 'not in this test');
  }

  async close(): Promise<void> {}
}

const labels = (count: number): string[] => Array.from({ length: count }, (_v, i) => `category number ${i}`);

let app: FastifyInstance | null = null;
afterEach(async () => {
  await app?.close();
  app = null;
});

describe('classify: a synchronous request stops its work when it times out, and large taxonomies are not synchronous', () => {
  it('a build that outlives the request timeout is aborted with the 504: no category request starts after it', async () => {
    const engine = new SlowEngine();
    app = localGateway(engine, { requestTimeoutMs: TIMEOUT_MS });
    // 2,048 categories = 4 encode requests of 512, two at a time: the second pair would start after the first, past the deadline.
    const response = await app.inject({ method: 'POST', url: '/v1/classify', payload: { model: 'tiny-bert-mean', items: ['a product'], labels: labels(MAX_SYNC_TAXONOMY_CATEGORIES), mode: 'sync' } });
    expect(response.statusCode).toBe(504);
    expect(ErrorBody.parse(response.json()).error.code).toBe(ErrorCode.TIMEOUT);
    const started = engine.calls.length;
    expect(started).toBe(2);
    // Every request already started has settled (aborted, or answered); then the build had its chance to start more.
    await Promise.all(engine.calls.map((call) => call.settled));
    await tick();
    expect(engine.calls.map((call) => call.aborted)).toEqual([true, true]);
    expect(engine.calls.length).toBe(started);
  });

  it('a build another request still waits for goes on when one of its requests leaves', async () => {
    const engine = new SlowEngine();
    app = localGateway(engine, { requestTimeoutMs: 60_000 });
    let handlers = 0;
    const reached: Array<() => void> = [];
    app.addHook('preHandler', async () => {
      handlers += 1;
      for (const wake of reached.splice(0)) wake();
    });
    const handlerCount = async (count: number): Promise<void> => {
      while (handlers < count) await new Promise<void>((resolve) => reached.push(resolve));
      // The handler runs on from the hook to the shared build without waiting on anything.
      await tick();
    };
    const url = await app.listen({ host: '127.0.0.1', port: 0 });
    const body = JSON.stringify({ model: 'tiny-bert-mean', items: ['a product'], labels: labels(600), mode: 'sync' });
    const post = (signal?: AbortSignal): Promise<Response> => fetch(`${url}/v1/classify`, { method: 'POST', headers: { 'content-type': 'application/json' }, body, ...(signal === undefined ? {} : { signal }) });
    const leaving = new AbortController();
    const first = post(leaving.signal).catch((error: unknown) => error);
    await handlerCount(1);
    const second = post();
    await handlerCount(2);
    leaving.abort();
    expect(await first).toBeInstanceOf(Error);
    const answer = await second;
    expect(answer.status).toBe(200);
    // One build for both (600 categories = 2 requests, then 1 for the product), none aborted.
    expect(engine.calls.map((call) => [call.items, call.aborted])).toEqual([[512, false], [88, false], [1, false]]);
  });

  it(`a taxonomy of more than ${MAX_SYNC_TAXONOMY_CATEGORIES} categories is 413 INPUT_TOO_LARGE naming taxonomy in mode "sync", and a job in mode "auto"`, async () => {
    const engine = new SlowEngine();
    app = localGateway(engine, { requestTimeoutMs: 60_000 });
    const taxonomy = labels(MAX_SYNC_TAXONOMY_CATEGORIES + 1);
    const sync = await app.inject({ method: 'POST', url: '/v1/classify', payload: { model: 'tiny-bert-mean', items: ['a product'], labels: taxonomy, mode: 'sync' } });
    expect(sync.statusCode).toBe(413);
    const refusal = ErrorBody.parse(sync.json());
    expect(refusal.error.code).toBe(ErrorCode.INPUT_TOO_LARGE);
    expect(refusal.error.details).toEqual({ field: 'taxonomy', limit: MAX_SYNC_TAXONOMY_CATEGORIES, categories: MAX_SYNC_TAXONOMY_CATEGORIES + 1 });
    expect(engine.calls).toEqual([]);
    const auto = await app.inject({ method: 'POST', url: '/v1/classify', payload: { model: 'tiny-bert-mean', items: ['a product'], labels: taxonomy } });
    expect(auto.statusCode).toBe(202);
    expect(auto.headers.location).toMatch(/^\/v1\/jobs\//);
  });
});
