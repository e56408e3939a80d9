import { ErrorCode, ShoalError } from '../protocol/errors.js';
import { ort } from './ort-session.js';

/** Dense row-major view of a float output tensor. */
export interface FloatTensor {
  data: Float32Array;
  dims: readonly number[];
}

export function int64Tensor(values: BigInt64Array, dims: readonly number[]): ort.Tensor {
  return new ort.Tensor('int64', values, dims);
}

export function float32Tensor(values: Float32Array, dims: readonly number[]): ort.Tensor {
  return new ort.Tensor('float32', values, dims);
}

export function boolTensor(values: Uint8Array, dims: readonly number[]): ort.Tensor {
  return new ort.Tensor('bool', values, dims);
}

/**
 * Runs a session after checking that every input it declares is fed and nothing unknown is,
 * so a mismatched export fails with the missing names instead of an opaque ORT error.
 */
export async function runChecked(
  session: ort.InferenceSession,
  feeds: Record<string, ort.Tensor>,
  what: string,
  /** Outputs to fetch (default: all); a graph with extra outputs then copies only these. */
  fetches?: readonly string[],
): Promise<Record<string, ort.Tensor>> {
  const missing = session.inputNames.filter((name) => !(name in feeds));
  if (missing.length > 0) {
    throw new ShoalError(
      ErrorCode.INFERENCE_FAILED,
      `${what}: the ONNX graph needs inputs [${missing.join(', ')}] that this model family does not provide`,
    );
  }
  const used: Record<string, ort.Tensor> = {};
  for (const name of session.inputNames) {
    const tensor = feeds[name];
    if (tensor !== undefined) used[name] = tensor;
  }
  try {
    return fetches === undefined ? await session.run(used) : await session.run(used, [...fetches]);
  } catch (error) {
    throw new ShoalError(ErrorCode.INFERENCE_FAILED, `${what}: onnxruntime failed: ${String(error)}`, { cause: error });
  }
}

export function floatOutput(outputs: Record<string, ort.Tensor>, name: string, what: string): FloatTensor {
  const tensor = outputs[name];
  if (tensor === undefined) {
    throw new ShoalError(
      ErrorCode.INFERENCE_FAILED,
      `${what}: the ONNX graph has no output "${name}" (outputs: ${Object.keys(outputs).join(', ')})`,
    );
  }
  if (tensor.type !== 'float32' || !(tensor.data instanceof Float32Array)) {
    throw new ShoalError(ErrorCode.INFERENCE_FAILED, `${what}: output "${name}" is ${tensor.type}, expected float32`);
  }
  return { data: tensor.data, dims: tensor.dims };
}
