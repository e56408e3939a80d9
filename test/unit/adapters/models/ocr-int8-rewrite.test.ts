import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as ort from 'onnxruntime-node';
import { describe, expect, it } from 'vitest';
import { int8Weights, liftToOpset13, quantizableConvs, quantizeConvs, uint8Params, withExtraOutputs, type TensorRange } from '../../../../bench/lib/ocr-int8-rewrite.js';
import { fusePaddleGraph } from '../../../../adapters/models/ocr/ocr-graph.js';
import { decodeOnnx, readOnnx, serializeOnnx, toInt } from '../../../../adapters/quantize/onnx-file.js';
import { builtinModelDir } from '../../../../adapters/sources/builtin-models.js';

/**
 * The bench's int8 rewrite of the PP-OCRv4 recognizer (bench/lib/ocr-int8-rewrite.ts), on the
 * real graph: lifting it from opset 9 to 13 changes nothing it computes, and the QDQ groups it
 * writes are the ones onnxruntime fuses into QLinearConv (so the speed measured by
 * bench/lib/ocr-int8-probe.ts is that of the integer kernels, not of unfused float ops).
 */

const REC = join(builtinModelDir('paddleocr/pp-ocrv4') ?? '', 'ch_PP-OCRv4_rec_infer.onnx');
const OPTIONS: ort.InferenceSession.SessionOptions = { intraOpNumThreads: 1, interOpNumThreads: 1, graphOptimizationLevel: 'all', logSeverityLevel: 3 };
const DIMS = [2, 3, 48, 160];

/** A fixed pseudo-random input in [-1, 1] (Park–Miller). */
function input(): Float32Array {
  let state = 16_807;
  return Float32Array.from({ length: DIMS.reduce((a, b) => a * b, 1) }, () => {
    state = (state * 48_271) % 2_147_483_647;
    return (state / 2_147_483_647) * 2 - 1;
  });
}

async function run(graph: Uint8Array, outputs?: readonly string[], options = OPTIONS): Promise<Record<string, Float32Array>> {
  const session = await ort.InferenceSession.create(graph, options);
  try {
    const result = await session.run({ [session.inputNames[0] ?? '']: new ort.Tensor('float32', input(), DIMS) });
    const found: Record<string, Float32Array> = {};
    for (const name of outputs ?? session.outputNames) {
      const data = result[name]?.data;
      if (data instanceof Float32Array) found[name] = data;
    }
    return found;
  } finally {
    await session.release();
  }
}

const bytesOf = (model: Parameters<typeof serializeOnnx>[0]): Uint8Array => serializeOnnx(model, 'unused.data').graph;

describe('int8 parameters', () => {
  it('uint8 ranges always hold 0 exactly', () => {
    const { scale, zeroPoint } = uint8Params({ min: -1.5, max: 6 });
    expect(scale).toBeCloseTo(7.5 / 255, 9);
    expect(zeroPoint).toBe(51);
    expect(uint8Params({ min: 2, max: 4 })).toEqual({ scale: 4 / 255, zeroPoint: 0 });
  });

  it('int8 weights are symmetric per output channel and round-trip within half a step', () => {
    const weight = Float32Array.of(0.5, -1, 0.25, 0.02, 0.04, -0.01);
    const { values, scales } = int8Weights(weight, 2);
    expect([...values.slice(0, 3)]).toEqual([64, -127, 32]);
    expect(values[4]).toBe(127);
    weight.forEach((w, i) => expect(Math.abs((values[i] ?? 0) * (scales[Math.floor(i / 3)] ?? 0) - w)).toBeLessThanOrEqual((scales[Math.floor(i / 3)] ?? 0) / 2 + 1e-9));
  });
});

describe('int8 rewrite of the PP-OCRv4 recognizer', () => {
  it('lifts the graph to opset 13 without changing its outputs', async () => {
    const loaded = await readOnnx(REC);
    fusePaddleGraph(loaded.model);
    const before = Object.values(await run(bytesOf(loaded.model)))[0] ?? new Float32Array(0);
    expect(liftToOpset13(loaded.model)).toBe(true);
    expect(toInt(loaded.model.opsetImport?.find((o) => (o.domain ?? '') === '')?.version)).toBe(13);
    const sliced = (loaded.model.graph?.node ?? []).filter((n) => n.opType === 'Slice' || n.opType === 'Squeeze');
    expect(sliced.length).toBeGreaterThan(0);
    for (const node of sliced) expect(node.attribute ?? []).toEqual([]);
    const after = Object.values(await run(bytesOf(loaded.model)))[0] ?? new Float32Array(1);
    expect(after.length).toBe(before.length);
    let diff = 0;
    for (let i = 0; i < before.length; i++) diff = Math.max(diff, Math.abs((before[i] ?? 0) - (after[i] ?? 0)));
    expect(diff).toBeLessThan(1e-5);
  }, 60_000);

  it('writes QDQ groups that onnxruntime fuses into one QLinearConv per convolution', async () => {
    const loaded = await readOnnx(REC);
    fusePaddleGraph(loaded.model);
    const convs = quantizableConvs(loaded.model);
    expect(convs).toHaveLength(38);
    const names = convs.flatMap((c) => [c.input, c.output]);
    const seen = await run(bytesOf(withExtraOutputs(loaded.model, names)), names);
    const ranges = new Map<string, TensorRange>();
    for (const name of names) {
      const values = seen[name] ?? new Float32Array(0);
      ranges.set(name, { min: values.reduce((a, b) => Math.min(a, b), 0), max: values.reduce((a, b) => Math.max(a, b), 0) });
    }
    expect(quantizeConvs(loaded.model, ranges)).toEqual({ convs: 38, skipped: 0 });
    const dir = mkdtempSync(join(tmpdir(), 'shoal-ocr-int8-'));
    try {
      const optimized = join(dir, 'rec.onnx');
      const out = Object.values(await run(bytesOf(loaded.model), undefined, { ...OPTIONS, optimizedModelFilePath: optimized }))[0];
      expect(out?.length).toBeGreaterThan(0);
      const ops = (decodeOnnx(new Uint8Array(readFileSync(optimized)), optimized).graph?.node ?? []).map((n) => n.opType);
      expect(ops.filter((op) => op === 'QLinearConv')).toHaveLength(38);
      expect(ops.filter((op) => op === 'Conv')).toHaveLength(0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);
});
