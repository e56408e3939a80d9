import * as ort from 'onnxruntime-node';
import { join } from 'node:path';
import { TextTokenizer } from '../../adapters/tokenizers/text-tokenizer.js';
import { packBatches } from '../../pipelines/inference/batcher.js';

/**
 * The hardware ceiling: raw onnxruntime-node on pre-tokenized, length-sorted batches, no threads,
 * no queues, no pooling work — the fastest this model can run on this machine with this thread count.
 */

export interface CeilingResult {
  budget: number;
  tokensPerSecond: number;
  seconds: number;
  realTokens: number;
  paddedTokens: number;
}

export async function tokenize(modelDir: string, texts: readonly string[], maxLength: number): Promise<number[][]> {
  const tokenizer = await TextTokenizer.load(modelDir);
  return texts.map((text) => tokenizer.encode(text, { maxLength }).ids);
}

/**
 * @param graph the ONNX file to run (default: the model's fp32 `onnx/model.onnx`; the int8
 * ceiling passes the quantized graph Shoal itself loads).
 */
/** How the ceiling (and every raw-onnxruntime comparison) creates its sessions: `threads` intra-op, sequential, no spinning. */
export function ceilingSessionOptions(threads: number): ort.InferenceSession.SessionOptions {
  return {
    intraOpNumThreads: threads,
    interOpNumThreads: 1,
    graphOptimizationLevel: 'all',
    executionMode: 'sequential',
    extra: { session: { intra_op: { allow_spinning: '0' } } },
  };
}

export async function measureCeiling(modelDir: string, ids: readonly number[][], budgets: readonly number[], threads: number, graph = join(modelDir, 'onnx', 'model.onnx')): Promise<CeilingResult[]> {
  const session = await ort.InferenceSession.create(graph, ceilingSessionOptions(threads));
  const results: CeilingResult[] = [];
  for (const budget of budgets) {
    const batches = packBatches(
      ids.map((row) => row.length),
      { maxBatchTokens: budget, maxBatchItems: 1024 },
    );
    // Tensors are built before timing: the ceiling measures the model alone.
    const feeds = batches.map((batch) => {
      const longest = Math.max(...batch.indices.map((i) => ids[i]?.length ?? 0));
      const n = batch.indices.length;
      const input = new BigInt64Array(n * longest);
      const mask = new BigInt64Array(n * longest);
      batch.indices.forEach((index, row) => {
        const tokens = ids[index] ?? [];
        tokens.forEach((id, t) => {
          input[row * longest + t] = BigInt(id);
          mask[row * longest + t] = 1n;
        });
      });
      const dims = [n, longest];
      return {
        input_ids: new ort.Tensor('int64', input, dims),
        attention_mask: new ort.Tensor('int64', mask, dims),
        token_type_ids: new ort.Tensor('int64', new BigInt64Array(n * longest), dims),
      };
    });
    await session.run(feeds[0] ?? {});
    const started = performance.now();
    for (const feed of feeds) await session.run(feed);
    const seconds = (performance.now() - started) / 1000;
    const realTokens = batches.reduce((a, b) => a + b.realTokens, 0);
    const paddedTokens = batches.reduce((a, b) => a + b.paddedTokens, 0);
    results.push({ budget, tokensPerSecond: realTokens / seconds, seconds, realTokens, paddedTokens });
  }
  await session.release();
  return results;
}
