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

export interface CeilingBatch {
  /** input_ids, attention_mask (1 on real tokens) and token_type_ids (zeros), [rows, width]. */
  feeds: Record<string, ort.Tensor>;
  /** Real tokens of each row, in batch order. */
  lengths: number[];
  width: number;
  realTokens: number;
  paddedTokens: number;
}

/** The length-sorted, right-padded batches of `ids` at one token budget, as the ceiling runs them. */
export function ceilingBatches(ids: readonly number[][], budget: number): CeilingBatch[] {
  return packBatches(ids.map((row) => row.length), { maxBatchTokens: budget, maxBatchItems: 1024 }).map((batch) => {
    const width = Math.max(...batch.indices.map((i) => ids[i]?.length ?? 0));
    const n = batch.indices.length;
    const input = new BigInt64Array(n * width);
    const mask = new BigInt64Array(n * width);
    const lengths = batch.indices.map((index, row) => {
      const tokens = ids[index] ?? [];
      tokens.forEach((id, t) => {
        input[row * width + t] = BigInt(id);
        mask[row * width + t] = 1n;
      });
      return tokens.length;
    });
    const dims = [n, width];
    const feeds = {
      input_ids: new ort.Tensor('int64', input, dims),
      attention_mask: new ort.Tensor('int64', mask, dims),
      token_type_ids: new ort.Tensor('int64', new BigInt64Array(n * width), dims),
    };
    return { feeds, lengths, width, realTokens: batch.realTokens, paddedTokens: batch.paddedTokens };
  });
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
    // Tensors are built before timing: the ceiling measures the model alone.
    const batches = ceilingBatches(ids, budget);
    const feeds = batches.map((batch) => batch.feeds);
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
