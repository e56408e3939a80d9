import { cpSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ErrorCode, hasErrorCode } from '../../../../adapters/protocol/errors.js';
import { PrepPool } from '../../../../adapters/model-threads/prep-pool.js';
import type { ModelProfile, ProfileOverrides } from '../../../../adapters/models/profile.js';
import { resolveRuntimeOptions } from '../../../../adapters/runtime/runtime-options.js';
import { ModelPool } from '../../../../pipelines/inference/pool.js';
import type { EvictionReason, ModelPoolOptions } from '../../../../pipelines/inference/pool-options.js';
import { FIXTURES_DIR } from '../../../helpers/shared.js';

/**
 * The model pool with real model threads on the committed fixture models. Every model is charged a
 * fixed size through the catalog's memory override, so the budget arithmetic is exact.
 */

const MB = 1_000_000;
const MODELS = ['tiny-bert-mean', 'tiny-bert-cls-prompts', 'tiny-roberta-mean', 'tiny-decoder-last', 'tiny-splade'];

let prep: PrepPool;
let scratch: string;
const pools: ModelPool[] = [];

beforeAll(() => {
  prep = new PrepPool();
  scratch = mkdtempSync(join(tmpdir(), 'shoal-pool-'));
});
afterEach(async () => {
  await Promise.all(pools.splice(0).map((pool) => pool.close()));
});
afterAll(async () => {
  await prep.close();
  rmSync(scratch, { recursive: true, force: true });
});

interface Recorder {
  loads: string[];
  evictions: { name: string; reason: EvictionReason }[];
  loadErrors: string[];
  maxResident: number;
}

function makePool(options: Partial<ModelPoolOptions> & { sizes?: Record<string, number>; dirs?: Record<string, string> } = {}): { pool: ModelPool; events: Recorder } {
  const events: Recorder = { loads: [], evictions: [], loadErrors: [], maxResident: 0 };
  const sizes = options.sizes ?? {};
  const pool = new ModelPool({
    resolve: (name: string): Promise<ModelProfile> => {
      const overrides: ProfileOverrides = { memory: { bytes: sizes[name] ?? 100 * MB } };
      return prep.describe(name, options.dirs?.[name] ?? join(FIXTURES_DIR, 'models', name), overrides);
    },
    runtime: resolveRuntimeOptions({ intraOpThreads: 1 }),
    budgetBytes: 250 * MB,
    predict: async (profile) => profile.memory.bytes ?? 100 * MB,
    admissionTimeoutMs: 2_000,
    ...options,
    hooks: {
      onLoad: (e) => events.loads.push(e.name),
      onEvict: (e) => events.evictions.push({ name: e.name, reason: e.reason }),
      onLoadError: (e) => events.loadErrors.push(`${e.name}:${e.error.code}`),
      onChange: (s) => {
        events.maxResident = Math.max(events.maxResident, s.residentBytes);
      },
    },
  });
  pools.push(pool);
  return { pool, events };
}

async function use(pool: ModelPool, name: string): Promise<void> {
  const lease = await pool.acquire(name);
  lease.release();
}

describe('ModelPool', () => {
  it('loads a model once for concurrent first requests (single flight)', async () => {
    const { pool, events } = makePool();
    const leases = await Promise.all(Array.from({ length: 6 }, () => pool.acquire('tiny-bert-mean')));
    expect(events.loads).toEqual(['tiny-bert-mean']);
    expect(new Set(leases.map((l) => l.model.worker)).size).toBe(1);
    expect(pool.snapshot().models[0]).toMatchObject({ name: 'tiny-bert-mean', inFlight: 6, state: 'ready', family: 'dense' });
    for (const lease of leases) lease.release();
    expect(pool.snapshot().models[0]?.inFlight).toBe(0);
  });

  it('evicts the least recently used idle model and never exceeds the budget', async () => {
    const { pool, events } = makePool();
    await use(pool, 'tiny-bert-mean');
    await use(pool, 'tiny-bert-cls-prompts');
    await use(pool, 'tiny-bert-mean'); // now tiny-bert-cls-prompts is the least recently used
    await use(pool, 'tiny-roberta-mean');
    expect(events.evictions).toEqual([{ name: 'tiny-bert-cls-prompts', reason: 'capacity' }]);
    await use(pool, 'tiny-decoder-last');
    expect(events.evictions.at(-1)).toEqual({ name: 'tiny-bert-mean', reason: 'capacity' });
    expect(pool.snapshot().models.map((m) => m.name).sort()).toEqual(['tiny-decoder-last', 'tiny-roberta-mean']);
    expect(events.maxResident).toBeLessThanOrEqual(250 * MB);
    expect(pool.residentBytes).toBe(200 * MB);
  });

  it('never evicts pinned models or models with requests in flight', async () => {
    const { pool, events } = makePool({ admissionTimeoutMs: 300 });
    await pool.preload('tiny-bert-mean', true);
    const busy = await pool.acquire('tiny-bert-cls-prompts');
    // Both resident models are untouchable: the third cannot get memory and says so.
    const error = await pool.acquire('tiny-roberta-mean').catch((e: unknown) => e);
    expect(hasErrorCode(error, ErrorCode.OVERLOADED)).toBe(true);
    expect(String(error)).toContain('tiny-bert-mean (pinned)');
    expect(String(error)).toContain('tiny-bert-cls-prompts (1 in flight)');
    expect(events.evictions).toEqual([]);
    // Once the busy model is released, the waiting load evicts it, not the pinned one.
    const waiting = pool.acquire('tiny-roberta-mean');
    busy.release();
    (await waiting).release();
    expect(events.evictions).toEqual([{ name: 'tiny-bert-cls-prompts', reason: 'capacity' }]);
    expect(pool.snapshot().models.find((m) => m.name === 'tiny-bert-mean')?.pinned).toBe(true);
    expect(pool.unpin('tiny-bert-mean')).toBe(true);
  });

  it('refuses a model larger than the whole budget with MODEL_TOO_LARGE', async () => {
    const { pool, events } = makePool({ sizes: { 'tiny-splade': 300 * MB } });
    const error = await pool.acquire('tiny-splade').catch((e: unknown) => e);
    expect(hasErrorCode(error, ErrorCode.MODEL_TOO_LARGE)).toBe(true);
    expect(String(error)).toMatch(/more than the whole memory budget/);
    expect(events.loadErrors).toEqual(['tiny-splade:MODEL_TOO_LARGE']);
    expect(pool.residentBytes).toBe(0);
  });

  it('reports a failed load per request, does not block other models, and retries later', async () => {
    const broken = join(scratch, 'broken');
    cpSync(join(FIXTURES_DIR, 'models', 'tiny-bert-mean'), broken, { recursive: true });
    writeFileSync(join(broken, 'onnx', 'model.onnx'), 'not a protobuf');
    const { pool, events } = makePool({ dirs: { broken } });
    const failures = await Promise.all([pool.acquire('broken'), pool.acquire('broken')].map((p) => p.catch((e: unknown) => e)));
    for (const failure of failures) expect(hasErrorCode(failure, ErrorCode.MODEL_LOAD_FAILED)).toBe(true);
    expect(events.loadErrors).toEqual(['broken:MODEL_LOAD_FAILED']);
    await use(pool, 'tiny-bert-mean');
    expect(pool.residentBytes).toBe(100 * MB);
    // Fix the file: the next request loads it.
    cpSync(join(FIXTURES_DIR, 'models', 'tiny-bert-mean', 'onnx', 'model.onnx'), join(broken, 'onnx', 'model.onnx'));
    await use(pool, 'broken');
    expect(events.loads).toEqual(['tiny-bert-mean', 'broken']);
  });

  it('unloads explicitly and after idle time, reporting the reason', async () => {
    const { pool, events } = makePool({ idleEvictMs: 200 });
    await use(pool, 'tiny-bert-mean');
    const lease = await pool.acquire('tiny-roberta-mean');
    await expect(pool.unload('tiny-roberta-mean')).rejects.toMatchObject({ code: 'UNAVAILABLE' });
    lease.release();
    expect(await pool.unload('tiny-roberta-mean')).toBe(true);
    expect(await pool.unload('tiny-roberta-mean')).toBe(false);
    await new Promise<void>((resolve) => {
      const check = setInterval(() => {
        if (events.evictions.some((e) => e.reason === 'idle')) {
          clearInterval(check);
          resolve();
        }
      }, 20);
    });
    // The idle sweep may run before or after the explicit unload: compare without order.
    expect(events.evictions).toHaveLength(2);
    expect(events.evictions).toEqual(
      expect.arrayContaining([
        { name: 'tiny-roberta-mean', reason: 'explicit' },
        { name: 'tiny-bert-mean', reason: 'idle' },
      ]),
    );
    expect(pool.snapshot().models).toEqual([]);
  });

  it('keeps the released sessions usable until eviction and closes everything on close()', async () => {
    const { pool, events } = makePool();
    const lease = await pool.acquire('tiny-bert-mean');
    expect(lease.model.worker.alive).toBe(true);
    lease.release();
    await pool.close();
    expect(lease.model.worker.alive).toBe(false);
    expect(events.evictions).toEqual([{ name: 'tiny-bert-mean', reason: 'shutdown' }]);
    await expect(pool.acquire('tiny-bert-mean')).rejects.toMatchObject({ code: 'UNAVAILABLE' });
  });

  it('close() waits for an interactive session still being created and releases it', async () => {
    const { pool } = makePool({ predictInteractive: async () => 10 * MB, interactiveRuntime: resolveRuntimeOptions({ intraOpThreads: 1 }) });
    const lease = await pool.acquire('tiny-bert-mean');
    let settled = false;
    const creating = pool.ensureInteractive(lease).finally(() => {
      settled = true;
    });
    // The extra bytes are charged just before the session's thread is started: from then on the
    // session is being created, in its own thread (as when the engine starts it in the background).
    const deadline = Date.now() + 10_000;
    while (pool.residentBytes < 110 * MB && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 1));
    expect(pool.residentBytes).toBe(110 * MB);
    lease.release();
    await pool.close();
    // Before the fix close() returned here with the session still being created; it was then
    // installed on the evicted model and its thread outlived close() (a process exiting now aborted).
    expect(settled).toBe(true);
    expect(await creating).toBe(false);
    expect(lease.model.interactive).toBeNull();
    expect(pool.residentBytes).toBe(0);
  });

  it('charges at least the measured RSS growth when no explicit size is configured', async () => {
    const { pool } = makePool({
      resolve: (name) => prep.describe(name, join(FIXTURES_DIR, 'models', name), {}),
      predict: async () => 1,
    });
    const lease = await pool.acquire(MODELS[0] ?? 'tiny-bert-mean');
    expect(lease.model.predictedBytes).toBe(1);
    expect(pool.snapshot().models[0]?.chargedBytes).toBe(Math.max(1, lease.model.measuredBytes));
    lease.release();
  });
});
