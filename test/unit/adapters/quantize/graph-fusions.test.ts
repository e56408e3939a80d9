import { join } from 'node:path';
import * as ort from 'onnxruntime-node';
import { describe, expect, it } from 'vitest';
import { readOnnx, serializeOnnx, type ModelProto } from '../../../../adapters/quantize/onnx-file.js';
import { fuseAttention } from '../../../../adapters/quantize/fuse-attention.js';
import { quantizeModel, type RewriteOptions, type RewriteReport } from '../../../../adapters/quantize/rewrite.js';
import { CONFORMANCE_DIR, missingReason, sharedAvailable } from '../../../helpers/shared.js';

/**
 * The int8 graph's structural rewrites on real kit graphs (Hugging Face exports, random weights),
 * run by onnxruntime on a padded batch: sibling projections merged into one
 * DynamicQuantizeMatMul (default) and eager attention fused into MultiHeadAttention (opt-in) must
 * give the unmerged, unfused int8 graph's outputs; and the fused attention alone, on the float
 * graph, must hide padding as the original does (a padded row equals the same row run alone; the
 * int8 graphs cannot show that: their activation scale is one per batch).
 */

const FAMILIES = [
  { name: 'bert-mean-embed', layers: 2 },
  { name: 'xlmr-mean-embed', layers: 2 },
  { name: 'bert-cross-encoder', layers: 2 },
] as const;
/** Per layer: Q, K, V merged (3 nodes → 1); Qwen2 also merges its MLP's gate and up (2 → 1). */
const QWEN = { name: 'qwen2-last-embed', layers: 2 };

const available = sharedAvailable(CONFORMANCE_DIR);

interface Built {
  model: ModelProto;
  report: RewriteReport;
  session: ort.InferenceSession;
}

async function build(name: string, options: Partial<RewriteOptions> | 'fp32' | 'fp32 fused', edit?: (model: ModelProto) => void): Promise<Built> {
  const { model } = await readOnnx(join(CONFORMANCE_DIR, name, 'onnx', 'model.onnx'));
  edit?.(model);
  let report: RewriteReport = { matmul: 0, gemm: 0, skippedSmall: 0, skippedOther: 0, floatWeightBytes: 0, int8WeightBytes: 0, mergedGroups: 0, mergedNodes: 0, fusedAttention: 0 };
  if (options === 'fp32 fused') {
    report.fusedAttention = fuseAttention(model.graph ?? {}, 14).fused;
    model.opsetImport = [...(model.opsetImport ?? []), { domain: 'com.microsoft', version: 1 }];
  } else if (options !== 'fp32') {
    report = quantizeModel(model, { minWeightElements: 0, weights: 'int8', mergeProjections: false, fuseAttention: false, ...options });
  }
  const session = await ort.InferenceSession.create(serializeOnnx(model, 'unused').graph, { intraOpNumThreads: 1, graphOptimizationLevel: 'all' });
  return { model, report, session };
}

const count = (model: ModelProto, op: string): number => (model.graph?.node ?? []).filter((n) => n.opType === op).length;

/** Rows of token ids of different lengths (ids 5..), right-padded with 0 and masked. */
const ROWS = [
  [101, 7, 8, 9, 10, 11, 12, 13, 102],
  [101, 21, 22, 102],
  [101, 31, 32, 33, 34, 35, 102],
];

function feeds(session: ort.InferenceSession, rows: readonly (readonly number[])[]): Record<string, ort.Tensor> {
  const width = Math.max(...rows.map((r) => r.length));
  const n = rows.length;
  const ids = new BigInt64Array(n * width);
  const mask = new BigInt64Array(n * width);
  const positions = new BigInt64Array(n * width);
  rows.forEach((row, r) =>
    row.forEach((id, t) => {
      ids[r * width + t] = BigInt(id);
      mask[r * width + t] = 1n;
      positions[r * width + t] = BigInt(t);
    }),
  );
  const all: Record<string, ort.Tensor> = {
    input_ids: new ort.Tensor('int64', ids, [n, width]),
    attention_mask: new ort.Tensor('int64', mask, [n, width]),
    token_type_ids: new ort.Tensor('int64', new BigInt64Array(n * width), [n, width]),
    position_ids: new ort.Tensor('int64', positions, [n, width]),
  };
  return Object.fromEntries(session.inputNames.map((input) => [input, all[input] ?? new ort.Tensor('int64', new BigInt64Array(n * width), [n, width])]));
}

async function output(built: Built, rows: readonly (readonly number[])[]): Promise<{ data: Float32Array; dims: readonly number[] }> {
  const result = await built.session.run(feeds(built.session, rows));
  const tensor = result[built.session.outputNames[0] ?? ''];
  if (tensor === undefined || !(tensor.data instanceof Float32Array)) throw new Error('no float output');
  return { data: tensor.data, dims: tensor.dims };
}

/** The largest |a − b| over the real (unpadded) token positions of every row, or over all values for per-row outputs. */
function maxDiff(a: { data: Float32Array; dims: readonly number[] }, b: { data: Float32Array; dims: readonly number[] }, rows: readonly (readonly number[])[]): number {
  expect(b.dims).toEqual(a.dims);
  const [n = 0, width = 0] = a.dims;
  const perRow = a.data.length / n;
  const tokenAxis = a.dims.length === 3 && width === Math.max(...rows.map((r) => r.length));
  let max = 0;
  for (let r = 0; r < n; r++) {
    const used = tokenAxis ? (rows[r]?.length ?? 0) * (perRow / width) : perRow;
    for (let i = 0; i < used; i++) max = Math.max(max, Math.abs((a.data[r * perRow + i] ?? 0) - (b.data[r * perRow + i] ?? 0)));
  }
  return max;
}

describe.skipIf(!available)(`int8 graph rewrites on kit graphs${available ? '' : ` (${missingReason(CONFORMANCE_DIR)})`}`, () => {
  for (const family of FAMILIES) {
    it(`${family.name}: Q/K/V merged into one node per layer, attention fused, outputs unchanged, padding masked`, async () => {
      const plain = await build(family.name, {});
      const merged = await build(family.name, { mergeProjections: true });
      const fused = await build(family.name, { mergeProjections: true, fuseAttention: true });
      try {
        expect(merged.report).toMatchObject({ mergedGroups: family.layers, mergedNodes: 3 * family.layers, fusedAttention: 0 });
        expect(count(merged.model, 'DynamicQuantizeMatMul')).toBe(count(plain.model, 'DynamicQuantizeMatMul') - 2 * family.layers);
        expect(count(merged.model, 'Split')).toBe(count(plain.model, 'Split') + family.layers);
        expect(fused.report.fusedAttention).toBe(family.layers);
        expect(count(fused.model, 'MultiHeadAttention')).toBe(family.layers);
        expect(count(fused.model, 'Softmax')).toBe(0);

        const reference = await output(plain, ROWS);
        // One activation scale per tensor and exact int32 sums: the same numbers (bit-identical
        // on the machines measured; a bound, not equality, for kernels that block differently).
        expect(maxDiff(reference, await output(merged, ROWS), ROWS)).toBeLessThanOrEqual(1e-5);
        expect(maxDiff(reference, await output(fused, ROWS), ROWS)).toBeLessThanOrEqual(1e-5);

      } finally {
        await Promise.all([plain, merged, fused].map((b) => b.session.release()));
      }
    });
  }

  for (const family of FAMILIES) {
    it(`${family.name}, float graph: the fused attention masks padding as the original does`, async () => {
      const original = await build(family.name, 'fp32');
      const fused = await build(family.name, 'fp32 fused');
      try {
        expect(fused.report.fusedAttention).toBe(family.layers);
        const batch = await output(fused, ROWS);
        expect(maxDiff(await output(original, ROWS), batch, ROWS)).toBeLessThanOrEqual(1e-5);
        // The shortest row, padded in the batch, equals the same row run alone.
        const short = ROWS[1] ?? [];
        const alone = await output(fused, [short]);
        const perRow = batch.data.length / ROWS.length;
        const used = batch.dims.length === 3 ? alone.data.length : perRow;
        let worst = 0;
        for (let i = 0; i < used; i++) worst = Math.max(worst, Math.abs((batch.data[perRow + i] ?? 0) - (alone.data[i] ?? 0)));
        expect(worst).toBeLessThanOrEqual(1e-5);
      } finally {
        await Promise.all([original.session.release(), fused.session.release()]);
      }
    });
  }

  it('qwen2-last-embed: Q/K/V and the MLP gate/up merged, outputs unchanged', async () => {
    const plain = await build(QWEN.name, {});
    const merged = await build(QWEN.name, { mergeProjections: true });
    try {
      // Q/K/V (3 → 1) and gate/up (2 → 1) per layer.
      expect(merged.report).toMatchObject({ mergedGroups: 2 * QWEN.layers, mergedNodes: 5 * QWEN.layers });
      expect(maxDiff(await output(plain, ROWS), await output(merged, ROWS), ROWS)).toBeLessThanOrEqual(1e-5);
    } finally {
      await Promise.all([plain.session.release(), merged.session.release()]);
    }
  });

  it('leaves a block whose attention probabilities are a graph output unfused, the others fused', async () => {
    let exposed = '';
    const fused = await build('bert-mean-embed', { fuseAttention: true }, (model) => {
      const softmax = (model.graph?.node ?? []).find((n) => n.opType === 'Softmax');
      exposed = softmax?.output?.[0] ?? '';
      model.graph?.output?.push({ name: exposed });
    });
    try {
      expect(exposed).not.toBe('');
      expect(fused.report.fusedAttention).toBe(1);
      expect(count(fused.model, 'Softmax')).toBe(1);
      const result = await fused.session.run(feeds(fused.session, ROWS));
      expect(result[exposed]?.dims.length).toBe(4);
    } finally {
      await fused.session.release();
    }
  });
});
