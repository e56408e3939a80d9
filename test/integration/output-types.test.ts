import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { FastifyInstance } from 'fastify';
import { ShoalMetrics } from '../../adapters/observability/metrics.js';
import { ErrorCode } from '../../adapters/protocol/errors.js';
import { REQUEST_SCHEMAS } from '../../adapters/protocol/jobs.js';
import { EmbeddingDtype } from '../../adapters/protocol/output-types.js';
import { InferenceEngine } from '../../pipelines/inference/engine.js';
import { buildGatewayApp } from '../../services/gateway/app.js';
import { conformanceDir } from '../helpers/conformance.js';
import { MemoryJobs, TEST_SETTINGS } from '../helpers/gateway.js';
import { referenceValues } from '../helpers/reference-quantize.js';
import { byId, jsonl, parseJsonl, runShoal } from '../helpers/shoal-cli.js';

/**
 * Output types and Matryoshka dimensions on every surface — the engine, `shoal encode --dtype
 * --dimensions`, HTTP /v1/encode (JSON numbers and base64) and the job request schema — checked
 * against the float32 vectors of the same texts run through the independent reference
 * implementation in test/helpers/reference-quantize.ts. bench-minilm-l6 has MiniLM's real
 * geometry: 384 dimensions, L2-normalized.
 */

const MODEL = conformanceDir('bench-minilm-l6');
const TEXTS = ['How many people live in Berlin?', 'Berlin has about 3.7 million inhabitants.', 'a red bicycle', 'Quantum error correction with surface codes'];

let engine: InferenceEngine;
let float32: number[][];

function truncated(v: number[], n: number, renormalize: boolean): number[] {
  const cut = v.slice(0, n).map(Math.fround);
  if (!renormalize) return cut;
  const norm = Math.sqrt(cut.reduce((a, x) => a + x * x, 0));
  return cut.map((x) => Math.fround(x / norm));
}

/** float32 compare within rounding; integer types exactly. */
function expectVector(actual: readonly number[], expected: readonly number[], dtype: string, label: string): void {
  expect(actual, label).toHaveLength(expected.length);
  if (dtype === 'float32') {
    actual.forEach((x, i) => expect(Math.abs(x - (expected[i] ?? 0)), `${label}[${i}]`).toBeLessThan(1e-6));
    return;
  }
  if (dtype === 'float16') {
    // A component within float32 rounding of a half-way point may round either way: allow one half step.
    actual.forEach((x, i) => expect(Math.abs(x - (expected[i] ?? 0)), `${label}[${i}]`).toBeLessThanOrEqual(Math.abs(expected[i] ?? 0) / 1024 + 1e-7));
    return;
  }
  // int8/uint8 codes may differ by one where float32 rounding crosses a code boundary; sign bits never.
  const tolerance = dtype === 'binary' || dtype === 'ubinary' ? 0 : 1;
  const off = actual.filter((x, i) => Math.abs(x - (expected[i] ?? 0)) > tolerance);
  expect(off, label).toEqual([]);
  const exact = actual.filter((x, i) => x === expected[i]).length;
  expect(exact / actual.length, `${label}: exact codes`).toBeGreaterThan(0.97);
}

beforeAll(async () => {
  engine = new InferenceEngine({ runtime: { intraOpThreads: 1 }, interactiveSessions: false });
  const result = await engine.encode({ model: MODEL, items: TEXTS });
  float32 = result.items.map((item) => item.dense ?? []);
});
afterAll(async () => {
  await engine.close();
});

describe('engine', () => {
  it('float32 vectors are unit length, 384 wide', () => {
    for (const v of float32) {
      expect(v).toHaveLength(384);
      expect(Math.sqrt(v.reduce((a, x) => a + x * x, 0))).toBeCloseTo(1, 5);
    }
  });

  for (const dtype of EmbeddingDtype.options) {
    it(`dtype ${dtype} equals the reference of the float32 vectors`, async () => {
      const result = await engine.encode({ model: MODEL, items: TEXTS, dtype });
      result.items.forEach((item, i) => expectVector(item.dense ?? [], referenceValues(float32[i] ?? [], dtype), dtype, `${dtype} #${i}`));
      if (dtype === 'binary' || dtype === 'ubinary') expect(result.items[0]?.dense).toHaveLength(48);
    });
  }

  it('dimensions: truncate then renormalize, before the output type', async () => {
    const cut = await engine.encode({ model: MODEL, items: TEXTS, dimensions: 64 });
    cut.items.forEach((item, i) => expectVector(item.dense ?? [], truncated(float32[i] ?? [], 64, true), 'float32', `64 #${i}`));
    const packed = await engine.encode({ model: MODEL, items: TEXTS, dimensions: 64, dtype: 'int8' });
    packed.items.forEach((item, i) => expectVector(item.dense ?? [], referenceValues(truncated(float32[i] ?? [], 64, true), 'int8'), 'int8', `64 int8 #${i}`));
  });

  it('dimensions with normalize: false is the plain cut', async () => {
    const raw = await engine.encode({ model: MODEL, items: TEXTS.slice(0, 1), normalize: false });
    const cut = await engine.encode({ model: MODEL, items: TEXTS.slice(0, 1), normalize: false, dimensions: 32 });
    expectVector(cut.items[0]?.dense ?? [], (raw.items[0]?.dense ?? []).slice(0, 32), 'float32', 'raw cut');
  });

  it('more dimensions than the model has is INVALID_INPUT', async () => {
    await expect(engine.encode({ model: MODEL, items: TEXTS.slice(0, 1), dimensions: 385 })).rejects.toMatchObject({ code: ErrorCode.INVALID_INPUT });
  });

  it('job requests carry dtype and dimensions (the worker runs them through the same engine.encode)', () => {
    const parsed = REQUEST_SCHEMAS.encode.parse({ model: 'm', items: ['x'], dtype: 'ubinary', dimensions: 128 });
    expect(parsed).toMatchObject({ dtype: 'ubinary', dimensions: 128 });
    expect(REQUEST_SCHEMAS.encode.safeParse({ model: 'm', items: ['x'], dtype: 'int4' }).success).toBe(false);
  });
});

describe('HTTP /v1/encode', () => {
  let app: FastifyInstance;
  beforeAll(async () => {
    const metrics = new ShoalMetrics({ processMetrics: false });
    app = buildGatewayApp(
      { engine, jobs: new MemoryJobs(), models: async () => [], metrics, ready: async () => ({ ready: true }) },
      { ...TEST_SETTINGS, bodyLimitBytes: 1024 * 1024 },
    );
    await app.ready();
  });
  afterAll(async () => {
    await app.close();
  });

  const Body = z.looseObject({ items: z.array(z.looseObject({ index: z.number(), dense: z.union([z.string(), z.array(z.number())]) })) });

  /** Decodes base64 by hand: little-endian floats, halves by the textbook formula, bytes as they are. */
  function decode(base64: string, dtype: string): number[] {
    const bytes = Buffer.from(base64, 'base64');
    const out: number[] = [];
    if (dtype === 'float32') for (let i = 0; i < bytes.length; i += 4) out.push(bytes.readFloatLE(i));
    else if (dtype === 'float16') {
      for (let i = 0; i < bytes.length; i += 2) {
        const h = bytes.readUInt16LE(i);
        const e = (h >> 10) & 31;
        const m = (e === 0 ? m0(h) : 1 + (h & 1023) / 1024) * Math.pow(2, e === 0 ? -14 : e - 15);
        out.push(h & 0x8000 ? -m : m);
      }
    } else if (dtype === 'int8' || dtype === 'binary') for (let i = 0; i < bytes.length; i++) out.push(bytes.readInt8(i));
    else out.push(...bytes);
    return out;
  }
  const m0 = (h: number): number => (h & 1023) / 1024;

  for (const dtype of EmbeddingDtype.options) {
    it(`dtype ${dtype}: JSON numbers and base64 carry the same values`, async () => {
      const json = await app.inject({ method: 'POST', url: '/v1/encode', payload: { model: MODEL, items: TEXTS, dtype, dimensions: 128 } });
      expect(json.statusCode, json.body).toBe(200);
      const b64 = await app.inject({ method: 'POST', url: '/v1/encode', payload: { model: MODEL, items: TEXTS, dtype, dimensions: 128, encoding_format: 'base64' } });
      expect(b64.statusCode, b64.body).toBe(200);
      const numbers = Body.parse(JSON.parse(json.body)).items;
      const packed = Body.parse(JSON.parse(b64.body)).items;
      numbers.forEach((item, i) => {
        const values = z.array(z.number()).parse(item.dense);
        expectVector(values, referenceValues(truncated(float32[i] ?? [], 128, true), dtype), dtype, `http ${dtype} #${i}`);
        const text = z.string().parse(packed[i]?.dense);
        expect(decode(text, dtype)).toEqual(values);
      });
    });
  }

  it('an unknown dtype is a 422 (INVALID_INPUT) naming the field', async () => {
    const response = await app.inject({ method: 'POST', url: '/v1/encode', payload: { model: MODEL, items: TEXTS, dtype: 'int4' } });
    expect(response.statusCode).toBe(422);
    expect(response.body).toContain('dtype');
  });
});

describe('shoal encode --dtype --dimensions', () => {
  const Line = z.strictObject({ id: z.number(), dense: z.array(z.number()) });

  it('writes the requested type and width', async () => {
    const stdin = jsonl(TEXTS.map((text, id) => ({ id, text })));
    const run = await runShoal(['encode', '--model', MODEL, '--dtype', 'ubinary', '--dimensions', '256'], { stdin });
    expect(run.code, run.stderr).toBe(0);
    const lines = byId(parseJsonl(run.stdout, Line));
    TEXTS.forEach((_, i) => expectVector(lines.get(i)?.dense ?? [], referenceValues(truncated(float32[i] ?? [], 256, true), 'ubinary'), 'ubinary', `cli #${i}`));
    expect(lines.get(0)?.dense).toHaveLength(32);
  });

  it('refuses an unknown --dtype with exit status 2', async () => {
    const run = await runShoal(['encode', '--model', MODEL, '--dtype', 'int4'], { stdin: jsonl([{ id: 1, text: 'x' }]) });
    expect(run.code).toBe(2);
    expect(run.stderr).toContain('--dtype');
  });
});
