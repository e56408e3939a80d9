import { z } from 'zod';
import { basename, dirname } from 'node:path';

/**
 * The peer: @huggingface/transformers' feature-extraction pipeline used the way its documentation
 * shows — batches of 32 in arrival order, mean pooling, normalize — on the same local model files,
 * truncating at the same maximum length as Shoal. The pipeline truncates at the tokenizer's
 * `model_max_length` (512 for MiniLM) and has no option for another; left there, it would do up to
 * twice Shoal's work on long texts, so the bench sets it to Shoal's limit and checks it took.
 */

export interface PeerResult {
  tokensPerSecond: number;
  seconds: number;
  embeddings: number[][];
}

const Tokenized = z.object({ input_ids: z.object({ dims: z.array(z.number()) }) });

export async function measurePeer(modelDir: string, texts: readonly string[], realTokens: number, threads: number, maxLength: number, batchSize = 32): Promise<PeerResult> {
  const transformers = await import('@huggingface/transformers');
  transformers.env.allowRemoteModels = false;
  transformers.env.localModelPath = `${dirname(modelDir)}/`;
  const extractor = await transformers.pipeline('feature-extraction', basename(modelDir), {
    dtype: 'fp32',
    device: 'cpu',
    session_options: { intraOpNumThreads: threads, interOpNumThreads: 1 },
  });
  // `model_max_length` is a getter over tokenizer_config.json; an own property shadows it.
  Object.defineProperty(extractor.tokenizer, 'model_max_length', { value: maxLength });
  const probe = Tokenized.parse(extractor.tokenizer(['word '.repeat(maxLength * 2)], { padding: true, truncation: true }));
  if (probe.input_ids.dims[1] !== maxLength) throw new Error(`peer truncates at ${probe.input_ids.dims[1]} tokens, not ${maxLength}`);
  await extractor([texts[0] ?? ''], { pooling: 'mean', normalize: true });
  const embeddings: number[][] = [];
  const started = performance.now();
  for (let i = 0; i < texts.length; i += batchSize) {
    const output = await extractor(texts.slice(i, i + batchSize), { pooling: 'mean', normalize: true });
    embeddings.push(...z.array(z.array(z.number())).parse(output.tolist()));
  }
  const seconds = (performance.now() - started) / 1000;
  await extractor.dispose();
  return { tokensPerSecond: realTokens / seconds, seconds, embeddings };
}
