import { z } from 'zod';
import { basename, dirname } from 'node:path';

/**
 * The peer: @huggingface/transformers' feature-extraction pipeline used the way its documentation
 * shows — batches of 32 in arrival order, mean pooling, normalize — on the same local model files.
 */

export interface PeerResult {
  tokensPerSecond: number;
  seconds: number;
  embeddings: number[][];
}

export async function measurePeer(modelDir: string, texts: readonly string[], realTokens: number, threads: number, batchSize = 32): Promise<PeerResult> {
  const transformers = await import('@huggingface/transformers');
  transformers.env.allowRemoteModels = false;
  transformers.env.localModelPath = `${dirname(modelDir)}/`;
  const extractor = await transformers.pipeline('feature-extraction', basename(modelDir), {
    dtype: 'fp32',
    device: 'cpu',
    session_options: { intraOpNumThreads: threads, interOpNumThreads: 1 },
  });
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
