import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { decodeOnnx, onnx } from '../../adapters/quantize/onnx-file.js';
import { quantizeModel } from '../../adapters/quantize/rewrite.js';
import { parseCatalog } from '../../pipelines/inference/catalog.js';
import { InferenceEngine } from '../../pipelines/inference/engine.js';
import { loadConformance, numberMatrix, type ConformanceModel } from '../helpers/conformance.js';
import { q4Graph } from '../helpers/q4-graph.js';

/**
 * A repository that ships `model_q4.onnx` (MatMulNBits, transformers.js) or `model_quantized.onnx`
 * beside the float graph: the catalog's `precision` (`q4`, `int8`, `fp32`) chooses one. The kit
 * ships float graphs only, so the variants are built here from the kit's own graph (q4: 4-bit
 * blocks of 16 with a scale each, helpers/q4-graph.ts; int8: Shoal's own DynamicQuantizeMatMul
 * rewrite of every MatMul), and each precision is run on every kit case of both Qwen3 layouts;
 * what each costs is printed and bounded (docs/models.md records the figures).
 */

const embedder = loadConformance('qwen3-kv-embed');
const reranker = loadConformance('qwen3-reranker');
const root = mkdtempSync(join(tmpdir(), 'shoal-q4-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const PRECISIONS = ['fp32', 'int8', 'q4'] as const;

/** A copy of a kit folder (links) with the three graphs; the folder name keeps "reranker" for detection. */
function variants(model: ConformanceModel): string {
  const dir = join(root, `${model.name}-variants`);
  mkdirSync(join(dir, 'onnx'), { recursive: true });
  for (const file of model.cases.files as string[]) {
    if (file === 'cases.json' || file.startsWith('onnx/')) continue;
    mkdirSync(join(dir, file, '..'), { recursive: true });
    symlinkSync(join(model.dir, file), join(dir, file));
  }
  const source = join(model.dir, 'onnx', 'model.onnx');
  const bytes = readFileSync(source);
  symlinkSync(source, join(dir, 'onnx', 'model.onnx'));
  writeFileSync(join(dir, 'onnx', 'model_q4.onnx'), q4Graph(bytes).onnx);
  const int8 = decodeOnnx(bytes, source);
  quantizeModel(int8, { minWeightElements: 0 });
  writeFileSync(join(dir, 'onnx', 'model_quantized.onnx'), onnx.ModelProto.encode(int8).finish());
  return dir;
}

function cosine(a: readonly number[], b: readonly number[]): number {
  let dot = 0;
  let na = 0;
  let nb = 0;
  a.forEach((x, i) => {
    const y = b[i] ?? 0;
    dot += x * y;
    na += x * x;
    nb += y * y;
  });
  return dot / Math.sqrt(na * nb);
}

describe.skipIf(embedder === null || reranker === null)('Qwen3 layouts in fp32, int8 and q4', () => {
  let engine: InferenceEngine;
  const embedDir = embedder === null ? '' : variants(embedder);
  const rerankDir = reranker === null ? '' : variants(reranker);
  beforeAll(() => {
    const models: Record<string, unknown> = {};
    for (const precision of PRECISIONS) {
      models[`embed-${precision}`] = { source: embedDir, precision };
      models[`rerank-${precision}`] = { source: rerankDir, precision };
    }
    // Shoal's own int8 rewrite of the kit's float graph (no shipped int8 graph in the kit folder itself).
    models['rerank-own-int8'] = { source: (reranker as ConformanceModel).dir, precision: 'int8', quantization: { min_weight_elements: 0 } };
    engine = new InferenceEngine({ catalog: parseCatalog({ models }, 'precision test'), runtime: { intraOpThreads: 1, cacheDir: join(root, 'cache') } });
  });
  afterAll(async () => {
    await engine.close();
  });

  it('each precision picks its graph and says so', async () => {
    const expected = { fp32: ['fp32', 'onnx/model.onnx'], int8: ['int8', 'onnx/model_quantized.onnx'], q4: ['q4', 'onnx/model_q4.onnx'] } as const;
    for (const precision of PRECISIONS) {
      for (const name of [`embed-${precision}`, `rerank-${precision}`]) {
        const inspected = await engine.inspect(name);
        expect(inspected.profile.onnx.model, name).toBe(expected[precision][1]);
        expect(inspected.info.precision?.model?.effective, name).toBe(expected[precision][0]);
      }
    }
  });

  it("int8 quantized by Shoal: the fidelity check feeds the KV-cache inputs empty and passes", async () => {
    const info = (await engine.inspect('rerank-own-int8')).info.precision?.model;
    expect(info?.effective, info?.warning).toBe('int8');
    expect(info?.origin).toMatch(/^quantized/);
    expect(info?.fidelity?.minCosine).toBeGreaterThan(0.99);
    const kase = (reranker as ConformanceModel).cases.cases[0];
    const inputs = z.looseObject({ query: z.string(), documents: z.array(z.string()) }).parse(kase?.inputs);
    const want = z.looseObject({ ranking_best_first: z.array(z.number()) }).parse(kase?.expected);
    const got = await engine.score({ model: 'rerank-own-int8', query: inputs.query, items: inputs.documents });
    expect(got.scores.map((s) => s.index)).toEqual(want.ranking_best_first);
  });

  it('what each precision costs on the kit: embedding cosine and P(yes) difference against the fp32 reference', async () => {
    const embed = embedder as ConformanceModel;
    const rerank = reranker as ConformanceModel;
    const cost: Record<string, { minCosine: number; maxScoreDiff: number; rankingsKept: string }> = {};
    for (const precision of PRECISIONS) {
      let minCosine = 1;
      for (const kase of embed.cases.cases) {
        const { texts, prompt_name: prompt } = z.looseObject({ texts: z.array(z.string()), prompt_name: z.string().optional() }).parse(kase.inputs);
        const want = numberMatrix(z.looseObject({ embeddings: z.unknown() }).parse(kase.expected).embeddings, 'embeddings');
        const got = await engine.encode({ model: `embed-${precision}`, items: texts, ...(prompt === undefined ? {} : { prompt }) });
        got.items.forEach((item, i) => {
          minCosine = Math.min(minCosine, cosine(item.dense ?? [], want[i] ?? []));
        });
      }
      let maxScoreDiff = 0;
      let kept = 0;
      for (const kase of rerank.cases.cases) {
        const inputs = z.looseObject({ query: z.string(), documents: z.array(z.string()), instruction: z.string().optional() }).parse(kase.inputs);
        const want = z.looseObject({ scores: z.array(z.number()), ranking_best_first: z.array(z.number()) }).parse(kase.expected);
        const got = await engine.score({ model: `rerank-${precision}`, query: inputs.query, items: inputs.documents, ...(inputs.instruction === undefined ? {} : { instruction: inputs.instruction }) });
        for (const s of got.scores) maxScoreDiff = Math.max(maxScoreDiff, Math.abs(s.score - (want.scores[s.index] ?? Number.NaN)));
        if (JSON.stringify(got.scores.map((s) => s.index)) === JSON.stringify(want.ranking_best_first)) kept++;
      }
      cost[precision] = { minCosine, maxScoreDiff, rankingsKept: `${kept}/${rerank.cases.cases.length}` };
    }
    console.info(`Qwen3 kit precision cost: ${JSON.stringify(cost)}`);
    expect(cost.fp32?.minCosine).toBeGreaterThan(0.999999);
    expect(cost.fp32?.maxScoreDiff).toBeLessThanOrEqual(rerank.atol);
    // Measured: int8 cosine 0.99976, P(yes) within 0.014; q4 cosine 0.983, P(yes) within 0.22; every ranking kept.
    expect(cost.int8?.minCosine).toBeGreaterThan(0.999);
    expect(cost.q4?.minCosine).toBeGreaterThan(0.97);
    expect(cost.int8?.maxScoreDiff).toBeLessThan(0.05);
    expect(cost.q4?.maxScoreDiff).toBeLessThan(0.4);
    for (const precision of PRECISIONS) expect(cost[precision]?.rankingsKept, precision).toBe(`${rerank.cases.cases.length}/${rerank.cases.cases.length}`);
  });
});
