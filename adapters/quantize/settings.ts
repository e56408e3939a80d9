import { z } from 'zod';
import { WEIGHT_FORMATS } from './int8-weights.js';
import { DEFAULT_MIN_WEIGHT_ELEMENTS } from './quantized-cache.js';

/**
 * Per-model quantization settings: the catalog's `quantization:` block (snake_case, all optional)
 * and the resolved, camelCase form carried in the ModelProfile.
 *
 *   models:
 *     minilm:
 *       source: sentence-transformers/all-MiniLM-L6-v2
 *       precision: auto          # fp32 | int8 | auto (int8 on CPU-only providers)
 *       quantization:
 *         min_cosine: 0.995      # fidelity floor; below it the model runs fp32 (default 0.99)
 *         min_weight_elements: 16384
 *         weights: auto          # auto | int8 | uint8: how int8 codes are stored (int8-weights.ts)
 *         merge_projections: false  # one int8 node for Q/K/V (merge-projections.ts)
 *         fuse_attention: false     # eager attention as MultiHeadAttention (fuse-attention.ts)
 */

/** @default 0.99: int8 outputs must keep a cosine similarity of at least this with fp32 outputs. */
export const DEFAULT_MIN_COSINE = 0.99;

export const QuantizationOverrides = z.strictObject({
  /** Fidelity floor (cosine, fp32 vs int8 outputs on calibration inputs). Above 1 nothing passes. */
  min_cosine: z.number().gt(0).max(2).optional(),
  /** MatMul/Gemm weights with fewer elements stay float. */
  min_weight_elements: z.number().int().nonnegative().optional(),
  /** `auto` (default): int8 on x86 CPUs with VNNI, uint8 elsewhere, decided where the model loads. */
  weights: z.enum(['auto', ...WEIGHT_FORMATS]).optional(),
  /** Opt-in graph rewrites that keep every output to the bit (quantized-cache.ts QuantizeOptions says why off). */
  merge_projections: z.boolean().optional(),
  fuse_attention: z.boolean().optional(),
});
export type QuantizationOverrides = z.infer<typeof QuantizationOverrides>;

export const QuantizationSettings = z.strictObject({
  minCosine: z.number().gt(0).max(2),
  minWeightElements: z.number().int().nonnegative(),
  weights: z.enum(['auto', ...WEIGHT_FORMATS]),
  mergeProjections: z.boolean().default(false),
  fuseAttention: z.boolean().default(false),
});
export type QuantizationSettings = z.infer<typeof QuantizationSettings>;

export function resolveQuantizationSettings(overrides: QuantizationOverrides = {}): QuantizationSettings {
  return {
    minCosine: overrides.min_cosine ?? DEFAULT_MIN_COSINE,
    minWeightElements: overrides.min_weight_elements ?? DEFAULT_MIN_WEIGHT_ELEMENTS,
    weights: overrides.weights ?? 'auto',
    mergeProjections: overrides.merge_projections ?? false,
    fuseAttention: overrides.fuse_attention ?? false,
  };
}
