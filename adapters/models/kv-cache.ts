import { z } from 'zod';

/**
 * Decoder graphs exported with a KV cache (Optimum `*-with-past`, transformers.js conversions of
 * Qwen3-Embedding and Qwen3-Reranker) take `past_key_values.{i}.key|value` inputs and return
 * `present.*`. An encoder-style call (one pass over the whole text) feeds every past input as an
 * empty tensor [batch, kv_heads, 0, head_dim] and reads none of the present outputs. The dtype
 * and the two fixed axes come from the graph's own declaration, falling back to config.json
 * (num_key_value_heads, head_dim) where the export left them symbolic (kv-cache-detect.ts). This
 * file holds only the profile's schema: the main thread imports it.
 */

const PAST_INPUT = /^past_key_values\.\d+\.(key|value)$|^past\.\d+\.(key|value)$/;
const PRESENT_OUTPUT = /^present\.|^present_key_values\./;

export const PastInput = z.strictObject({
  name: z.string(),
  dtype: z.enum(['float32', 'float16']),
  /** Key/value heads (grouped-query attention: fewer than the query heads). */
  heads: z.number().int().positive(),
  headDim: z.number().int().positive(),
});
export type PastInput = z.infer<typeof PastInput>;

export function isPastInput(name: string): boolean {
  return PAST_INPUT.test(name);
}

export function isPresentOutput(name: string): boolean {
  return PRESENT_OUTPUT.test(name);
}
