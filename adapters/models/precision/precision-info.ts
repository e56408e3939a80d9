import type { ModelProfile } from '../profile.js';

/**
 * What a model thread reports about the precision each ONNX component runs in. A leaf of its
 * own: the family contract (family.ts, RunnerInfo) names it without importing the quantizer side
 * (precision.ts → calibration.ts → family.ts would otherwise be a circle).
 */

export type EffectivePrecision = 'fp32' | 'int8' | 'q4';

export interface PrecisionInfo {
  requested: ModelProfile['precision'];
  effective: EffectivePrecision;
  /** The graph file the session was created from. */
  graph: string;
  /** Where that graph came from. */
  origin: 'float graph' | 'shipped int8 graph' | 'shipped 4-bit graph' | 'quantized (cached)' | 'quantized (built now)';
  /** Why the effective precision differs from an int8/auto request (absent when it does not). */
  reason?: string;
  /** Set when int8 was asked for and refused. */
  warning?: string;
  /** Source and int8 graph sizes (graph + external data), when Shoal quantized the model. */
  bytes?: { source: number; quantized: number };
  /** MatMul/Gemm nodes rewritten to int8. */
  rewritten?: number;
  fidelity?: { floor: number; minCosine: number; outputs: { name: string; cosine: number; maxAbsDiff: number }[] };
  /** Time spent getting the int8 graph and checking it (ms). */
  quantizeMs?: number;
}
