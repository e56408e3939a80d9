import { decodeOnnx, onnx, type ModelProto, type TensorProto } from '../../adapters/quantize/onnx-file.js';
import { floatValues, dimsOf } from '../../adapters/quantize/onnx-file.js';

/**
 * A 4-bit variant of a float graph, laid out as transformers.js ships `model_q4.onnx`: every
 * MatMul whose weight is a constant float [K, N] initializer becomes onnxruntime's
 * `com.microsoft.MatMulNBits` (bits 4, blocks of 16 along K, one float scale per block and
 * column, the default zero point 8). The kit ships no 4-bit graph; this builds one from its
 * float graph, for the precision tests.
 */

const BLOCK = 16;

function quantizeWeight(values: Float32Array, k: number, n: number): { packed: Uint8Array; scales: Float32Array } {
  const blocks = Math.ceil(k / BLOCK);
  const blob = BLOCK / 2;
  const packed = new Uint8Array(n * blocks * blob);
  const scales = new Float32Array(n * blocks);
  for (let col = 0; col < n; col++) {
    for (let block = 0; block < blocks; block++) {
      let amax = 0;
      for (let i = 0; i < BLOCK; i++) {
        const row = block * BLOCK + i;
        if (row < k) amax = Math.max(amax, Math.abs(values[row * n + col] ?? 0));
      }
      const scale = amax === 0 ? 1 : amax / 7;
      scales[col * blocks + block] = scale;
      for (let i = 0; i < BLOCK; i++) {
        const row = block * BLOCK + i;
        const w = row < k ? (values[row * n + col] ?? 0) : 0;
        const q = Math.min(15, Math.max(0, Math.round(w / scale) + 8));
        const at = (col * blocks + block) * blob + (i >> 1);
        packed[at] = (packed[at] ?? 0) | (i % 2 === 0 ? q : q << 4);
      }
    }
  }
  return { packed, scales };
}

/** The 4-bit graph of `bytes` (a float ONNX model), and how many MatMuls became MatMulNBits. */
export function q4Graph(bytes: Uint8Array): { onnx: Uint8Array; rewritten: number } {
  const model: ModelProto = decodeOnnx(bytes, 'q4 source');
  const graph = model.graph ?? {};
  const initializers = new Map<string, TensorProto>();
  for (const tensor of graph.initializer ?? []) initializers.set(tensor.name ?? '', tensor);
  const replaced = new Set<string>();
  let rewritten = 0;
  graph.node = (graph.node ?? []).map((node) => {
    if (node.opType !== 'MatMul') return node;
    const weight = initializers.get(node.input?.[1] ?? '');
    const dims = weight === undefined ? [] : dimsOf(weight);
    const values = weight === undefined ? null : floatValues(weight);
    if (weight === undefined || dims.length !== 2 || values === null) return node;
    const [k = 0, n = 0] = dims;
    const { packed, scales } = quantizeWeight(values, k, n);
    const name = weight.name ?? '';
    graph.initializer?.push(
      { name: `${name}_q4`, dataType: onnx.TensorProto.DataType.UINT8, dims: [n, Math.ceil(k / BLOCK), BLOCK / 2], rawData: packed },
      { name: `${name}_q4_scales`, dataType: onnx.TensorProto.DataType.FLOAT, dims: [scales.length], rawData: new Uint8Array(scales.buffer) },
    );
    replaced.add(name);
    rewritten++;
    return {
      ...node,
      opType: 'MatMulNBits',
      domain: 'com.microsoft',
      input: [node.input?.[0] ?? '', `${name}_q4`, `${name}_q4_scales`],
      attribute: [
        { name: 'K', type: onnx.AttributeProto.AttributeType.INT, i: k },
        { name: 'N', type: onnx.AttributeProto.AttributeType.INT, i: n },
        { name: 'bits', type: onnx.AttributeProto.AttributeType.INT, i: 4 },
        { name: 'block_size', type: onnx.AttributeProto.AttributeType.INT, i: BLOCK },
      ],
    };
  });
  // A float weight some other node still reads (a tied embedding) stays.
  const stillRead = new Set((graph.node ?? []).flatMap((node) => node.input ?? []));
  graph.initializer = (graph.initializer ?? []).filter((tensor) => !replaced.has(tensor.name ?? '') || stillRead.has(tensor.name ?? ''));
  model.opsetImport = [...(model.opsetImport ?? []).filter((o) => o.domain !== 'com.microsoft'), { domain: 'com.microsoft', version: 1 }];
  return { onnx: onnx.ModelProto.encode(model).finish(), rewritten };
}
