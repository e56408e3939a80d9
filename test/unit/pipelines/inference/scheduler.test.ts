import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ErrorCode, hasErrorCode } from '../../../../adapters/protocol/errors.js';
import type { Prepared, PreparedText } from '../../../../adapters/models/family.js';
import { PrepPool } from '../../../../adapters/model-threads/prep-pool.js';
import { resolveRuntimeOptions } from '../../../../adapters/runtime/runtime-options.js';
import type { LoadedModel, ModelLease } from '../../../../pipelines/inference/loaded-model.js';
import { ModelPool } from '../../../../pipelines/inference/pool.js';
import { Scheduler } from '../../../../pipelines/inference/scheduler.js';
import type { BatchEvent, SchedulerOptions } from '../../../../pipelines/inference/scheduler-options.js';
import { FIXTURES_DIR } from '../../../helpers/shared.js';

/**
 * The scheduler on real model threads (committed fixture models): batching across requests,
 * order of results, lanes, fair share, cancellation, deadlines, failure isolation, backpressure.
 */

let prep: PrepPool;
let pool: ModelPool;
const leases: ModelLease[] = [];
let bert: LoadedModel;
let roberta: LoadedModel;

async function prepare(model: LoadedModel, texts: string[]): Promise<Prepared[]> {
  return prep.prepare(model.profile, { task: 'encode', items: texts.map((text) => ({ text, role: 'document' })), maxLength: model.profile.maxLength });
}

function texts(n: number, words: (i: number) => number = (i) => 1 + (i % 7)): string[] {
  return Array.from({ length: n }, (_, i) => Array.from({ length: words(i) }, (_, k) => (k % 2 === 0 ? 'the' : 'hello')).join(' '));
}

function scheduler(options: Partial<SchedulerOptions>, events: BatchEvent[] = []): Scheduler {
  return new Scheduler({ maxBatchTokens: 64, maxBatchItems: 16, maxWaitMs: 0, ...options, hooks: { onBatch: (e) => events.push(e) } });
}

beforeAll(async () => {
  prep = new PrepPool();
  pool = new ModelPool({
    resolve: (name) => prep.describe(name, join(FIXTURES_DIR, 'models', name), {}),
    runtime: resolveRuntimeOptions({ intraOpThreads: 1 }),
    budgetBytes: 4e9,
    predict: async () => 1e6,
  });
  for (const name of ['tiny-bert-mean', 'tiny-roberta-mean']) leases.push(await pool.acquire(name));
  [bert, roberta] = leases.map((lease) => lease.model) as [LoadedModel, LoadedModel];
});

afterAll(async () => {
  for (const lease of leases) lease.release();
  await pool.close();
  await prep.close();
});

describe('Scheduler', () => {
  it('splits a large request into budget-sized batches and reassembles results in input order', async () => {
    const events: BatchEvent[] = [];
    const s = scheduler({ maxBatchTokens: 256 }, events);
    const items = await prepare(bert, texts(60, (i) => 3 + ((i * 7) % 37)));
    const together = await s.submit({ model: bert, lane: 'bulk', items, options: { outputs: ['dense'] } });
    const alone = await Promise.all(items.map((item) => bert.worker.run([item], { outputs: ['dense'] })));
    expect(together).toHaveLength(60);
    together.forEach((output, i) => {
      const single = alone[i]?.outputs[0]?.dense ?? [];
      (output.dense ?? []).forEach((v, k) => expect(Math.abs(v - (single[k] ?? NaN))).toBeLessThan(1e-5));
    });
    expect(events.length).toBeGreaterThan(3);
    for (const e of events) {
      expect(e.paddedTokens).toBeLessThanOrEqual(256);
      expect(e.items).toBeLessThanOrEqual(16);
    }
    const padded = events.reduce((a, e) => a + e.paddedTokens, 0);
    const real = events.reduce((a, e) => a + e.realTokens, 0);
    expect((padded - real) / padded).toBeLessThan(0.1);
  });

  it('batches items of different requests together', async () => {
    const events: BatchEvent[] = [];
    const s = scheduler({ maxWaitMs: 50 }, events);
    const done = s.preparing(bert);
    const a = s.submit({ model: bert, lane: 'bulk', items: await prepare(bert, texts(3, () => 2)), options: { outputs: ['dense'] } });
    const b = s.submit({ model: bert, lane: 'bulk', items: await prepare(bert, texts(3, () => 2)), options: { outputs: ['dense'] } });
    // While items are still being prepared and the batch is not full, nothing starts.
    expect(s.runningBatches).toBe(0);
    done();
    await Promise.all([a, b]);
    expect(events.map((e) => e.items)).toEqual([6]);
  });

  it('puts interactive items into the very next batch, ahead of queued bulk work', async () => {
    const events: BatchEvent[] = [];
    const s = scheduler({}, events);
    // The model serves interactive traffic on its primary session (it has no interactive one)...
    await s.submit({ model: bert, lane: 'interactive', items: await prepare(bert, ['hi']), options: { outputs: ['dense'] } });
    events.length = 0;
    const bulk = s.submit({ model: bert, lane: 'bulk', items: await prepare(bert, texts(200)), options: { outputs: ['dense'] } });
    // ...so no bulk batch is queued behind the running one.
    expect(s.runningBatches).toBe(1);
    await s.submit({ model: bert, lane: 'interactive', items: await prepare(bert, ['hello']), options: { outputs: ['dense'] } });
    const interactiveAt = events.findIndex((e) => e.lane === 'interactive');
    // At most the bulk batch already running (and one that started while the query was tokenized).
    expect(interactiveAt).toBeLessThanOrEqual(2);
    expect(events.filter((e) => e.lane === 'bulk').length).toBeGreaterThan(interactiveAt);
    await bulk;
    expect(events.length).toBeGreaterThan(interactiveAt + 5);
  });

  it('keeps one bulk batch queued behind the running one when no query needs the session', async () => {
    const s = scheduler({});
    const fresh = await pool.acquire('tiny-decoder-last');
    try {
      const run = s.submit({ model: fresh.model, lane: 'bulk', items: await prepare(fresh.model, texts(100)), options: { outputs: ['dense'] } });
      expect(s.runningBatches).toBe(2);
      await run;
    } finally {
      fresh.release();
    }
  });

  it('shares batch slots fairly between models with bulk backlogs', async () => {
    const events: BatchEvent[] = [];
    const s = scheduler({}, events);
    const [bi, ri] = await Promise.all([prepare(bert, texts(150)), prepare(roberta, texts(150))]);
    await Promise.all([
      s.submit({ model: bert, lane: 'bulk', items: bi, options: { outputs: ['dense'] } }),
      s.submit({ model: roberta, lane: 'bulk', items: ri, options: { outputs: ['dense'] } }),
    ]);
    const firstHalf = events.slice(0, Math.floor(events.length / 2));
    const share = (name: string) => firstHalf.filter((e) => e.model === name).reduce((a, e) => a + e.paddedTokens, 0);
    const ratio = share('tiny-bert-mean') / share('tiny-roberta-mean');
    expect(ratio).toBeGreaterThan(0.7);
    expect(ratio).toBeLessThan(1.4);
  });

  it('drops the queued items of a cancelled request and fails it with CANCELLED', async () => {
    const events: BatchEvent[] = [];
    const s = scheduler({}, events);
    const controller = new AbortController();
    const items = await prepare(bert, texts(300));
    const running = s.submit({ model: bert, lane: 'bulk', items, options: { outputs: ['dense'] }, signal: controller.signal });
    controller.abort();
    const error = await running.catch((e: unknown) => e);
    expect(hasErrorCode(error, ErrorCode.CANCELLED)).toBe(true);
    await s.idle();
    // Only what was already handed to the model thread ran: the running batch and the one queued behind it.
    expect(events.length).toBeLessThanOrEqual(2);
    expect(s.queuedItems).toBe(0);
  });

  it('fails items whose deadline passed before they reached a batch with TIMEOUT', async () => {
    const s = scheduler({});
    const blocker = s.submit({ model: bert, lane: 'bulk', items: await prepare(bert, texts(100)), options: { outputs: ['dense'] } });
    const late = s.submit({ model: roberta, lane: 'bulk', items: await prepare(roberta, ['hello']), options: { outputs: ['dense'] }, deadline: Date.now() - 1 });
    expect(hasErrorCode(await late.catch((e: unknown) => e), ErrorCode.TIMEOUT)).toBe(true);
    await blocker;
  });

  it('isolates a failing request that shared a batch with others', async () => {
    const s = scheduler({ maxWaitMs: 50 });
    const done = s.preparing(bert);
    const good = await prepare(bert, ['hello the', 'the hello']);
    const first = good[0] as PreparedText;
    // An id far outside the vocabulary makes the embedding Gather fail inside onnxruntime.
    const poison: PreparedText = { ...first, ids: [first.ids[0] ?? 0, 9_999_999, first.ids.at(-1) ?? 0] };
    const ok = s.submit({ model: bert, lane: 'bulk', items: good, options: { outputs: ['dense'] } });
    const bad = s.submit({ model: bert, lane: 'bulk', items: [poison], options: { outputs: ['dense'] } });
    done();
    const [okResult, badResult] = await Promise.allSettled([ok, bad]);
    expect(okResult.status).toBe('fulfilled');
    expect(badResult.status).toBe('rejected');
    if (badResult.status === 'rejected') expect(hasErrorCode(badResult.reason, ErrorCode.INFERENCE_FAILED)).toBe(true);
  });

  it('applies backpressure: bulk submitters wait while the queue is full', async () => {
    const s = scheduler({ maxQueuedItems: 60 });
    const first = s.submit({ model: bert, lane: 'bulk', items: await prepare(bert, texts(100)), options: { outputs: ['dense'] } });
    expect(s.hasCapacity(10)).toBe(false);
    // The queue depth per lane (shoal_queue_items{lane}) adds up to the total.
    expect(s.queuedByLane).toEqual({ interactive: 0, bulk: s.queuedItems });
    expect(s.queuedItems).toBeGreaterThan(0);
    let admitted = false;
    const waiting = s.waitForCapacity(10).then(() => {
      admitted = true;
    });
    expect(admitted).toBe(false);
    await waiting;
    expect(s.queuedItems).toBeLessThanOrEqual(50);
    await first;
    expect(s.queuedByLane).toEqual({ interactive: 0, bulk: 0 });
  });

  it('refuses work after close()', async () => {
    const s = scheduler({});
    s.close();
    await expect(s.submit({ model: bert, lane: 'bulk', items: await prepare(bert, ['x']), options: { outputs: ['dense'] } })).rejects.toMatchObject({
      code: 'UNAVAILABLE',
    });
  });
});

describe('Scheduler with a reused AbortSignal', () => {
  it('removes its abort listener when a request settles', async () => {
    const s = scheduler({});
    const controller = new AbortController();
    const added: string[] = [];
    const removed: string[] = [];
    const signal = controller.signal;
    const add = signal.addEventListener.bind(signal);
    const remove = signal.removeEventListener.bind(signal);
    signal.addEventListener = (...params: Parameters<AbortSignal['addEventListener']>) => {
      added.push(params[0]);
      add(...params);
    };
    signal.removeEventListener = (...params: Parameters<AbortSignal['removeEventListener']>) => {
      removed.push(params[0]);
      remove(...params);
    };
    for (let i = 0; i < 20; i++) {
      await s.submit({ model: bert, lane: 'bulk', items: await prepare(bert, ['hello']), options: { outputs: ['dense'] }, signal });
    }
    expect(added).toHaveLength(20);
    expect(removed).toHaveLength(20);
  });
});

describe('Scheduler with an interactive session', () => {
  // A second pool loads the same fixture again: its worker stands in for the model's interactive session.
  let queryPool: ModelPool;
  let queryLease: ModelLease;
  let model: LoadedModel;

  beforeAll(async () => {
    queryPool = new ModelPool({
      resolve: (name) => prep.describe(name, join(FIXTURES_DIR, 'models', name), {}),
      runtime: resolveRuntimeOptions({ intraOpThreads: 1 }),
      budgetBytes: 4e9,
      predict: async () => 1e6,
    });
    queryLease = await queryPool.acquire('tiny-bert-mean');
    model = { ...bert, name: 'tiny-bert-mean+query-session', interactive: queryLease.model.worker };
  });

  afterAll(async () => {
    queryLease.release();
    await queryPool.close();
  });

  const query = async (s: Scheduler, text: string) => s.submit({ model, lane: 'interactive', items: await prepare(model, [text]), options: { outputs: ['dense'] } });

  it('runs a lone query on the interactive session, and queries that pile up on the idle primary session beside it', async () => {
    const events: BatchEvent[] = [];
    const s = scheduler({}, events);
    const [alone] = await query(s, 'hello the');
    expect(events.map((e) => e.session)).toEqual(['interactive']);
    events.length = 0;
    // Interactive preparations do not hold the primary session back (no bulk item comes of them).
    const preparingQuery = s.preparing(model, 'interactive');
    const prepared = await Promise.all(['hello', 'the hello', 'hello the hello', 'the'].map((text) => prepare(model, [text])));
    const answers = prepared.map((items) => s.submit({ model, lane: 'interactive', items, options: { outputs: ['dense'] } }));
    // Both sessions work at once: the first query on the interactive session, the second on the primary one.
    expect(s.runningBatches).toBe(2);
    preparingQuery();
    const outputs = await Promise.all(answers);
    expect(new Set(events.map((e) => e.session))).toEqual(new Set(['primary', 'interactive']));
    expect(events.reduce((sum, e) => sum + e.items, 0)).toBe(4);
    // The same model on either session: the same vector as each query encoded alone.
    const reference = await Promise.all(prepared.map((items) => bert.worker.run(items, { outputs: ['dense'] })));
    outputs.forEach(([output], i) => {
      const single = reference[i]?.outputs[0]?.dense ?? [];
      expect(single.length).toBeGreaterThan(0);
      single.forEach((v, k) => expect(Math.abs(v - (output?.dense?.[k] ?? NaN))).toBeLessThan(1e-5));
    });
    expect(alone?.dense?.length).toBe(outputs[0]?.[0]?.dense?.length);
  });

  it('leaves the primary session to bulk work that is queued, being prepared or running', async () => {
    const events: BatchEvent[] = [];
    const s = scheduler({ maxWaitMs: 50 }, events);
    const preparingBulk = s.preparing(model);
    const pending = await Promise.all(['hello', 'the hello'].map((text) => prepare(model, [text])));
    const piled = pending.map((items) => s.submit({ model, lane: 'interactive', items, options: { outputs: ['dense'] } }));
    // The second query waits for the interactive session: the primary one is kept for the bulk work being prepared.
    expect(s.runningBatches).toBe(1);
    await Promise.all(piled);
    expect(events.map((e) => e.session)).toEqual(['interactive', 'interactive']);
    preparingBulk();
    events.length = 0;
    const bulk = s.submit({ model, lane: 'bulk', items: await prepare(model, texts(200)), options: { outputs: ['dense'] } });
    await query(s, 'the hello');
    await bulk;
    const queries = events.filter((e) => e.lane === 'interactive');
    expect(queries.map((e) => e.session)).toEqual(['interactive']);
    expect(events.filter((e) => e.lane === 'bulk').every((e) => e.session === 'primary')).toBe(true);
  });
});
