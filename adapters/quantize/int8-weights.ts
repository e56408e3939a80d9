/**
 * Symmetric per-column int8 quantization of a float weight matrix W[K, N] (rows = input features,
 * columns = output features, the layout MatMul's B has). Each output column n gets its own scale
 * s[n] = max_k |W[k, n]| / 127 and q[k, n] = round_half_even(W[k, n] / s[n]) in [-127, 127], so
 * W ≈ q × s with no zero point. Per-column scales keep one large column from crushing the
 * precision of all the others, which is what makes int8 weights usable for transformer layers.
 */

export const INT8_LIMIT = 127;

/**
 * How the int8 codes are stored in the graph: `uint8` (`q + 128` with zero point 128, the same
 * numbers) or `int8` (the codes themselves, zero point 0). Why two: onnxruntime's u8s8 kernel
 * (uint8 activations × int8 weights) on x86 CPUs without VNNI (AVX2 only, e.g. AMD Zen 2/3)
 * multiplies with VPMADDUBSW, which adds two uint8 × int8 products into a saturating int16
 * (255 × 127 × 2 = 64,770 > 32,767): the sums clip and the outputs drift (seen on an AVX2-only
 * EPYC: kit embedders fell from cosine 0.9999 to 0.98, the fidelity gate refused int8 for most
 * models). Its u8u8 kernel widens to 16 bits first and cannot saturate, so `uint8` is exact on
 * every CPU. On CPUs with VNNI (VPDPBUSD accumulates u8 × s8 straight into int32, no saturation)
 * the u8s8 kernel is the fast one: on a 2-core AMD EPYC with AVX-512 VNNI the raw int8 ceiling
 * of `bench-minilm-l6` was 1.41× fp32 with uint8 weights and 1.89× with int8 weights. So
 * `cpu-features.ts` picks `int8` where the CPU has VNNI and `uint8` everywhere else.
 */
export type WeightFormat = 'int8' | 'uint8';
export const WEIGHT_FORMATS = ['int8', 'uint8'] as const;

/** The zero point of uint8-stored weights. */
export const WEIGHT_ZERO_POINT = 128;

/** The zero point every column gets in `format`. */
export function weightZeroPoint(format: WeightFormat): number {
  return format === 'uint8' ? WEIGHT_ZERO_POINT : 0;
}

/** int8 codes as the weights the graph stores: unchanged for `int8`, `q + 128` for `uint8`. */
export function storedWeights(values: Int8Array, format: WeightFormat = 'uint8'): Int8Array | Uint8Array {
  if (format === 'int8') return values;
  const out = new Uint8Array(values.length);
  for (let i = 0; i < values.length; i++) out[i] = (values[i] ?? 0) + WEIGHT_ZERO_POINT;
  return out;
}

export interface Int8Columns {
  /** Row-major [K, N], like the float matrix. */
  values: Int8Array;
  /** One scale per column (float32). */
  scales: Float32Array;
}

/** Rounds to the nearest integer, ties to even (numpy's rint): the result depends on nothing but x. */
export function roundHalfEven(x: number): number {
  const floor = Math.floor(x);
  const fraction = x - floor;
  if (fraction > 0.5) return floor + 1;
  if (fraction < 0.5) return floor;
  return floor % 2 === 0 ? floor : floor + 1;
}

/** Whether every weight is finite: NaN or infinity has no int8 image, such a weight stays float. */
export function allFinite(values: Float32Array): boolean {
  for (const value of values) if (!Number.isFinite(value)) return false;
  return true;
}

/**
 * Quantizes W[K, N] column by column. `scaleFactor` multiplies every scale (Gemm's alpha is folded
 * in this way). An all-zero column gets scale 1 and zeros, which dequantizes exactly.
 */
export function quantizeColumns(weights: Float32Array, rows: number, cols: number, scaleFactor = 1): Int8Columns {
  const values = new Int8Array(rows * cols);
  const scales = new Float32Array(cols);
  const maxAbs = new Float64Array(cols);
  for (let k = 0; k < rows; k++) {
    const base = k * cols;
    for (let n = 0; n < cols; n++) {
      const magnitude = Math.abs(weights[base + n] ?? 0);
      if (magnitude > (maxAbs[n] ?? 0)) maxAbs[n] = magnitude;
    }
  }
  const steps = new Float64Array(cols);
  for (let n = 0; n < cols; n++) {
    const step = Math.fround((maxAbs[n] ?? 0) / INT8_LIMIT);
    steps[n] = step === 0 ? 1 : step;
    scales[n] = Math.fround((steps[n] ?? 1) * scaleFactor);
  }
  for (let k = 0; k < rows; k++) {
    const base = k * cols;
    for (let n = 0; n < cols; n++) {
      const q = roundHalfEven((weights[base + n] ?? 0) / (steps[n] ?? 1));
      values[base + n] = Math.max(-INT8_LIMIT, Math.min(INT8_LIMIT, q));
    }
  }
  return { values, scales };
}

/** B[N, K] → B^T[K, N] (Gemm with transB = 1 stores its weight transposed). */
export function transpose(matrix: Float32Array, rows: number, cols: number): Float32Array {
  const out = new Float32Array(rows * cols);
  for (let r = 0; r < rows; r++) {
    for (let c = 0; c < cols; c++) out[c * rows + r] = matrix[r * cols + c] ?? 0;
  }
  return out;
}
