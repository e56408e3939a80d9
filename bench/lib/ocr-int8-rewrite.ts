import { constantTensors, DataType, dimsOf, floatValues, freshName, rawTensor, tensorNames, toInt, type ModelProto, type NodeProto, type TensorProto } from '../../adapters/quantize/onnx-file.js';

/**
 * Static int8 for the PP-OCR recognizer's convolutions in QDQ form (pure). A bench tool, not
 * used by the model: measured on an AVX-512 VNNI CPU it made the recognizer slower and less
 * accurate (README "OCR", bench/lib/ocr-int8-probe.ts), so the recognizer stays fp32. Each
 * float Conv with constant weights gets QuantizeLinear → DequantizeLinear pairs on its input
 * (uint8, asymmetric, range from calibration), its weights (int8, symmetric, per output
 * channel), its bias (int32 at input scale × weight scale) and its output; onnxruntime's QDQ
 * fusion turns each group into one QLinearConv, which runs on the u8s8 integer kernels (VNNI).
 * The paddle2onnx graphs import opset 9, where QLinearConv (what the groups fuse into) does not
 * exist, so the graph is first lifted to opset 13 (liftToOpset13: the only ops of PP-OCR's graphs
 * whose form changed are Slice and Squeeze, whose attributes became inputs); the Q/DQ nodes are
 * the com.microsoft ones, which onnxruntime's QDQ selectors treat like the ONNX ones.
 */

export interface TensorRange {
  min: number;
  max: number;
}

export const MS_DOMAIN = 'com.microsoft';

/** Ops of an opset-9 graph that mean something else, or are spelled otherwise, at opset 13. */
const CHANGED_BY_13 = new Set(['Slice', 'Squeeze', 'Unsqueeze', 'Softmax', 'LogSoftmax', 'Hardmax', 'Clip', 'Upsample', 'Resize', 'Pad', 'Split', 'ReduceSum', 'TopK', 'Dropout', 'BatchNormalization']);

/**
 * Lifts an opset 9–12 graph to opset 13 in place: Slice's starts/ends/axes and Squeeze's axes move
 * from attributes to int64 inputs. Softmax keeps its `axis`; opset 13 reads it as one axis where
 * opset 9 flattened from it, which is the same for the last axis (PP-OCR's attention and output
 * softmaxes). Returns false, touching nothing, when the graph holds another op whose form changed.
 */
export function liftToOpset13(model: ModelProto): boolean {
  const graph = model.graph;
  const onnxImport = (model.opsetImport ?? []).find((entry) => (entry.domain ?? '') === '');
  const version = toInt(onnxImport?.version);
  if (graph === null || graph === undefined || onnxImport === undefined) return false;
  if (version >= 13) return true;
  const nodes = graph.node ?? [];
  const allowed = new Set(['Slice', 'Squeeze', 'Softmax', 'BatchNormalization']);
  if (nodes.some((node) => CHANGED_BY_13.has(node.opType ?? '') && !allowed.has(node.opType ?? ''))) return false;
  // BatchNormalization lost its training outputs (opset 9: up to 5); an inference graph has one.
  if (nodes.some((node) => node.opType === 'BatchNormalization' && (node.output ?? []).length > 1)) return false;
  const names = tensorNames(graph);
  const added: TensorProto[] = [];
  const int64s = (base: string, values: number[]): string => {
    const name = freshName(names, base);
    added.push(rawTensor(name, DataType.INT64, [values.length], new Uint8Array(BigInt64Array.from(values, (v) => BigInt(v)).buffer)));
    return name;
  };
  for (const node of nodes) {
    const ints = (name: string): number[] | undefined => node.attribute?.find((a) => a.name === name)?.ints?.map((v) => toInt(v));
    const [x = ''] = node.input ?? [];
    const base = node.output?.[0] ?? node.opType ?? 'lifted';
    if (node.opType === 'Slice' && (node.input ?? []).length === 1) {
      const starts = ints('starts') ?? [];
      const axes = ints('axes') ?? starts.map((_, i) => i);
      node.input = [x, int64s(`${base}_starts`, starts), int64s(`${base}_ends`, ints('ends') ?? []), int64s(`${base}_axes`, axes)];
      node.attribute = [];
    } else if (node.opType === 'Squeeze' && (node.input ?? []).length === 1) {
      const axes = ints('axes');
      node.input = axes === undefined ? [x] : [x, int64s(`${base}_axes`, axes)];
      node.attribute = [];
    }
  }
  graph.initializer = [...(graph.initializer ?? []), ...added];
  onnxImport.version = 13;
  return true;
}

/** What quantizeConvs changed. */
export interface Int8Report {
  convs: number;
  /** Convs left float: no calibrated range, non-constant weights, or excluded. */
  skipped: number;
}

/** Float Convs with constant weights, in graph order, with the tensors a calibration must see. */
export function quantizableConvs(model: ModelProto): { node: NodeProto; input: string; output: string }[] {
  const graph = model.graph;
  if (graph === null || graph === undefined) return [];
  const constants = constantTensors(graph, { constantNodes: true });
  const found: { node: NodeProto; input: string; output: string }[] = [];
  for (const node of graph.node ?? []) {
    if (node.opType !== 'Conv' || (node.domain ?? '') !== '') continue;
    const [input = '', weight = ''] = node.input ?? [];
    const tensor = constants.get(weight);
    if (tensor === undefined || floatValues(tensor) === null || dimsOf(tensor).length !== 4) continue;
    found.push({ node, input, output: node.output?.[0] ?? '' });
  }
  return found;
}

/**
 * A copy of `model` that also outputs every tensor in `names` (float, shape left to the runtime),
 * for a calibration run to see the ranges of the activations.
 */
export function withExtraOutputs(model: ModelProto, names: readonly string[]): ModelProto {
  const graph = model.graph ?? {};
  const existing = new Set((graph.output ?? []).map((o) => o.name ?? ''));
  const added = [...new Set(names)].filter((name) => !existing.has(name)).map((name) => ({ name, type: { tensorType: { elemType: DataType.FLOAT } } }));
  return { ...model, graph: { ...graph, output: [...(graph.output ?? []), ...added] } };
}

/** uint8 scale and zero point covering [min, max] and always 0 (so zero padding stays exact). */
export function uint8Params(range: TensorRange): { scale: number; zeroPoint: number } {
  const low = Math.min(0, range.min);
  const high = Math.max(0, range.max);
  const scale = high > low ? (high - low) / 255 : 1;
  const zeroPoint = Math.min(255, Math.max(0, Math.round(-low / scale)));
  return { scale, zeroPoint };
}

/** Symmetric per-output-channel int8 weights of a [O, I, kh, kw] convolution. */
export function int8Weights(weight: Float32Array, outChannels: number): { values: Int8Array; scales: Float32Array } {
  const perChannel = weight.length / outChannels;
  const values = new Int8Array(weight.length);
  const scales = new Float32Array(outChannels);
  for (let o = 0; o < outChannels; o++) {
    let peak = 0;
    for (let i = 0; i < perChannel; i++) peak = Math.max(peak, Math.abs(weight[o * perChannel + i] ?? 0));
    const scale = peak > 0 ? peak / 127 : 1;
    scales[o] = scale;
    for (let i = 0; i < perChannel; i++) values[o * perChannel + i] = Math.max(-127, Math.min(127, Math.round((weight[o * perChannel + i] ?? 0) / scale)));
  }
  return { values, scales };
}

class QdqWriter {
  readonly #names: Set<string>;
  readonly tensors: TensorProto[] = [];
  readonly nodes: NodeProto[] = [];

  constructor(names: Set<string>) {
    this.#names = names;
  }

  fresh(base: string): string {
    return freshName(this.#names, base);
  }

  tensor(base: string, dataType: number, dims: number[], values: Float32Array | Int8Array | Uint8Array | Int32Array): string {
    const name = freshName(this.#names, base);
    const bytes = values instanceof Int32Array ? new Uint8Array(values.buffer, values.byteOffset, values.byteLength) : values;
    this.tensors.push(rawTensor(name, dataType, dims, bytes));
    return name;
  }

  node(op: string, inputs: string[], base: string, axis?: number): string {
    const output = freshName(this.#names, base);
    this.nodes.push({
      opType: op,
      domain: MS_DOMAIN,
      input: inputs,
      output: [output],
      name: freshName(this.#names, `${base}_node`),
      attribute: axis === undefined ? [] : [{ name: 'axis', type: 2, i: axis }],
    });
    return output;
  }

  /** x → Q → DQ with one uint8 scale and zero point; returns the dequantized name. */
  activation(x: string, range: TensorRange): string {
    const { scale, zeroPoint } = uint8Params(range);
    const s = this.tensor(`${x}_scale`, DataType.FLOAT, [], Float32Array.of(scale));
    const z = this.tensor(`${x}_zero`, DataType.UINT8, [], Uint8Array.of(zeroPoint));
    const q = this.node('QuantizeLinear', [x, s, z], `${x}_q`);
    return this.node('DequantizeLinear', [q, s, z], `${x}_dq`);
  }
}

/**
 * Rewrites `model` in place: every quantizable Conv whose input and output have a range in
 * `ranges` (and whose index is not in `exclude`) becomes a QDQ group. Returns what was done.
 */
export function quantizeConvs(model: ModelProto, ranges: ReadonlyMap<string, TensorRange>, exclude: ReadonlySet<number> = new Set()): Int8Report {
  const graph = model.graph;
  if (graph === null || graph === undefined || !liftToOpset13(model)) return { convs: 0, skipped: 0 };
  const constants = constantTensors(graph, { constantNodes: true });
  const writer = new QdqWriter(tensorNames(graph));
  const report: Int8Report = { convs: 0, skipped: 0 };
  const inserted = new Map<NodeProto, NodeProto[]>();
  quantizableConvs(model).forEach(({ node, input, output }, index) => {
    const inRange = ranges.get(input);
    const outRange = ranges.get(output);
    const [, weightName = '', biasName] = node.input ?? [];
    const weightTensor = constants.get(weightName);
    const weight = weightTensor === undefined ? null : floatValues(weightTensor);
    if (exclude.has(index) || inRange === undefined || outRange === undefined || weightTensor === undefined || weight === null) {
      report.skipped++;
      return;
    }
    const dims = dimsOf(weightTensor);
    const outChannels = dims[0] ?? 1;
    const before = writer.nodes.length;
    const x = writer.activation(input, inRange);
    const inScale = uint8Params(inRange).scale;
    const { values, scales } = int8Weights(weight, outChannels);
    const ws = writer.tensor(`${weightName}_scale`, DataType.FLOAT, [outChannels], scales);
    const wz = writer.tensor(`${weightName}_zero`, DataType.INT8, [outChannels], new Int8Array(outChannels));
    const wq = writer.tensor(`${weightName}_int8`, DataType.INT8, dims, values);
    const w = writer.node('DequantizeLinear', [wq, ws, wz], `${weightName}_dq`, 0);
    const biasTensor = biasName === undefined || biasName === '' ? undefined : constants.get(biasName);
    const bias = biasTensor === undefined ? new Float32Array(outChannels) : (floatValues(biasTensor) ?? new Float32Array(outChannels));
    const biasScales = scales.map((s) => s * inScale);
    const biasInt = Int32Array.from(bias, (b, o) => Math.round(b / (biasScales[o] ?? 1)));
    const bq = writer.tensor(`${output}_bias_int32`, DataType.INT32, [outChannels], biasInt);
    const bs = writer.tensor(`${output}_bias_scale`, DataType.FLOAT, [outChannels], biasScales);
    const bz = writer.tensor(`${output}_bias_zero`, DataType.INT32, [outChannels], new Int32Array(outChannels));
    const b = writer.node('DequantizeLinear', [bq, bs, bz], `${output}_bias_dq`, 0);
    // The Conv now writes a fresh name; Q → DQ give its old name back to the readers.
    const convOut = writer.fresh(`${output}_float`);
    node.input = [x, w, b];
    node.output = [convOut];
    const { scale, zeroPoint } = uint8Params(outRange);
    const os = writer.tensor(`${output}_scale`, DataType.FLOAT, [], Float32Array.of(scale));
    const oz = writer.tensor(`${output}_zero`, DataType.UINT8, [], Uint8Array.of(zeroPoint));
    const oq = writer.node('QuantizeLinear', [convOut, os, oz], `${output}_q`);
    writer.nodes.push({ opType: 'DequantizeLinear', domain: MS_DOMAIN, input: [oq, os, oz], output: [output], name: `${output}_dq_node` });
    inserted.set(node, writer.nodes.slice(before));
    report.convs++;
  });
  // Graph order: each Conv's input Q/DQ and weight DQs before it, its output Q/DQ after it.
  const ordered: NodeProto[] = [];
  for (const node of graph.node ?? []) {
    const group = inserted.get(node);
    if (group === undefined) {
      ordered.push(node);
      continue;
    }
    const after = group.slice(-2);
    ordered.push(...group.slice(0, -2), node, ...after);
  }
  graph.node = ordered;
  graph.initializer = [...(graph.initializer ?? []), ...writer.tensors];
  const imports = model.opsetImport ?? [];
  if (!imports.some((entry) => entry.domain === MS_DOMAIN)) model.opsetImport = [...imports, { domain: MS_DOMAIN, version: 1 }];
  return report;
}
