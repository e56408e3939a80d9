import type { FidelityRecord, OutputFidelity } from '../../quantize/index.js';
import type { ort } from '../../runtime/ort-session.js';
import { runChecked } from '../../runtime/tensors.js';
import { CALIBRATION_VERSION, type CalibrationBatch } from './calibration.js';

/**
 * How far an int8 graph's outputs are from the float graph's on the same calibration batch: for
 * every float output, the cosine similarity per batch row over the row's real positions (padding
 * is implementation-defined and is skipped), worst row reported, plus the largest absolute
 * difference. Outputs with a single value per row (a reranker's logit) are compared as one
 * vector over the batch, where a cosine still means something.
 */

interface Accumulator {
  dot: number;
  left: number;
  right: number;
}

function cosineOf(acc: Accumulator): number {
  if (acc.left === 0 && acc.right === 0) return 1;
  if (acc.left === 0 || acc.right === 0) return 0;
  return acc.dot / Math.sqrt(acc.left * acc.right);
}

/** Which elements of one batch row are compared: all, or those at real token positions. */
function rowMask(dims: readonly number[], batch: CalibrationBatch): ((row: number, index: number) => boolean) | null {
  if (dims[0] !== batch.batchSize) return null;
  const perRow = dims.slice(1).reduce((a, b) => a * b, 1);
  if (dims.length >= 2 && dims[1] === batch.seqLen) {
    const perToken = perRow / batch.seqLen;
    return (row, index) => batch.mask[row * batch.seqLen + Math.floor(index / perToken)] === 1;
  }
  return () => true;
}

export function compareOutput(name: string, reference: ort.Tensor, candidate: ort.Tensor, batch: CalibrationBatch): OutputFidelity {
  const left = reference.data;
  const right = candidate.data;
  let maxAbsDiff = 0;
  if (!(left instanceof Float32Array) || !(right instanceof Float32Array) || left.length !== right.length) {
    return { name, cosine: 0, maxAbsDiff: Number.MAX_VALUE };
  }
  const dims = reference.dims;
  const keep = rowMask(dims, batch);
  const rows = keep === null ? 1 : batch.batchSize;
  const perRow = left.length / rows;
  const pooled: Accumulator = { dot: 0, left: 0, right: 0 };
  let worst = 1;
  for (let row = 0; row < rows; row++) {
    const acc: Accumulator = { dot: 0, left: 0, right: 0 };
    let counted = 0;
    for (let index = 0; index < perRow; index++) {
      if (keep !== null && !keep(row, index)) continue;
      const x = left[row * perRow + index] ?? 0;
      const y = right[row * perRow + index] ?? 0;
      acc.dot += x * y;
      acc.left += x * x;
      acc.right += y * y;
      maxAbsDiff = Math.max(maxAbsDiff, Math.abs(x - y));
      counted++;
    }
    pooled.dot += acc.dot;
    pooled.left += acc.left;
    pooled.right += acc.right;
    if (counted > 1) worst = Math.min(worst, cosineOf(acc));
  }
  const cosine = perRow <= 1 || rows === 1 ? cosineOf(pooled) : worst;
  return { name, cosine, maxAbsDiff };
}

/** Runs both sessions on `batch` and compares every float output the reference graph declares. */
export async function measureFidelity(
  reference: ort.InferenceSession,
  candidate: ort.InferenceSession,
  batch: CalibrationBatch,
  what: string,
): Promise<FidelityRecord> {
  const expected = await runChecked(reference, batch.feeds, `${what} (fp32 calibration)`);
  const actual = await runChecked(candidate, batch.feeds, `${what} (int8 calibration)`);
  const outputs: OutputFidelity[] = [];
  for (const name of reference.outputNames) {
    const left = expected[name];
    const right = actual[name];
    if (left === undefined || left.type !== 'float32') continue;
    outputs.push(right === undefined ? { name, cosine: 0, maxAbsDiff: Number.MAX_VALUE } : compareOutput(name, left, right, batch));
  }
  const minCosine = outputs.reduce((min, o) => Math.min(min, o.cosine), 1);
  return { calibration: CALIBRATION_VERSION, outputs, minCosine };
}
