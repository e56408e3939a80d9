import { MS_DOMAIN, QUANTIZED_OP } from './contrib-ops.js';
import { dimsOf, floatValues, freshName, onnx, rawTensor, tensorNames, type GraphProto, type NodeProto, type TensorProto } from './onnx-file.js';

/**
 * Sibling projections merged: `DynamicQuantizeMatMul` nodes that read the same activation (a
 * layer's Q, K and V projections; a gated MLP's gate and up) become one node over their weights
 * side by side, `[K, N₁ + N₂ + …]`, followed by a Split back into the original outputs.
 *
 * Why: each DynamicQuantizeMatMul quantizes its input again (a min/max pass and a uint8 copy of A
 * per node) and runs a narrower GEMM; one node quantizes A once and runs one wider GEMM. The
 * result is the same to the bit: the activation's scale is per tensor (identical for every
 * sibling), the weights keep their own per-column scales and zero points, and int32 accumulation
 * is exact. Only siblings of the same storage (K, weight type, bias present or not) merge.
 */


export interface MergeReport {
  /** Groups merged into one node. */
  groups: number;
  /** Nodes those groups had. */
  merged: number;
}

interface Projection {
  node: NodeProto;
  weight: TensorProto;
  scale: TensorProto;
  zeroPoint: TensorProto;
  bias: TensorProto | undefined;
  rows: number;
  cols: number;
}

function concatColumns(parts: readonly { bytes: Uint8Array; cols: number }[], rows: number, elementBytes: number): Uint8Array {
  const total = parts.reduce((sum, p) => sum + p.cols, 0);
  const out = new Uint8Array(rows * total * elementBytes);
  for (let r = 0; r < rows; r++) {
    let at = r * total * elementBytes;
    for (const part of parts) {
      const width = part.cols * elementBytes;
      out.set(part.bytes.subarray(r * width, (r + 1) * width), at);
      at += width;
    }
  }
  return out;
}

function rawBytes(tensor: TensorProto): Uint8Array | null {
  const raw = tensor.rawData;
  return raw !== null && raw !== undefined && raw.length > 0 ? new Uint8Array(raw) : null;
}

class ProjectionMerger {
  readonly report: MergeReport = { groups: 0, merged: 0 };
  readonly #graph: GraphProto;
  readonly #opset: number;
  readonly #initializers = new Map<string, TensorProto>();
  readonly #names: Set<string>;
  readonly #added: TensorProto[] = [];

  constructor(graph: GraphProto, opset: number) {
    this.#graph = graph;
    this.#opset = opset;
    for (const tensor of graph.initializer ?? []) if (tensor.name) this.#initializers.set(tensor.name, tensor);
    this.#names = tensorNames(graph);
  }

  #projection(node: NodeProto): Projection | undefined {
    if (node.opType !== QUANTIZED_OP || node.domain !== MS_DOMAIN) return undefined;
    const [, w = '', s = '', z = '', b] = node.input ?? [];
    const weight = this.#initializers.get(w);
    const scale = this.#initializers.get(s);
    const zeroPoint = this.#initializers.get(z);
    const bias = b === undefined || b === '' ? undefined : this.#initializers.get(b);
    if (weight === undefined || scale === undefined || zeroPoint === undefined || (b !== undefined && b !== '' && bias === undefined)) return undefined;
    const [rows = 0, cols = 0] = dimsOf(weight);
    if (dimsOf(weight).length !== 2 || rawBytes(weight) === null || dimsOf(scale).join() !== `${cols}` || dimsOf(zeroPoint).join() !== `${cols}`) return undefined;
    if (floatValues(scale) === null || rawBytes(zeroPoint) === null || (bias !== undefined && (floatValues(bias)?.length ?? -1) !== cols)) return undefined;
    return { node, weight, scale, zeroPoint, bias, rows, cols };
  }

  #add(base: string, dataType: number, dims: number[], values: Float32Array | Uint8Array | Int8Array): string {
    const tensor = rawTensor(freshName(this.#names, base), dataType, dims, values);
    this.#added.push(tensor);
    return tensor.name ?? '';
  }

  /** One node and a Split replacing `group` (same input, same storage). */
  #merge(group: readonly Projection[]): NodeProto[] {
    const [first] = group;
    if (first === undefined) return [];
    const rows = first.rows;
    const cols = group.map((p) => p.cols);
    const total = cols.reduce((a, b) => a + b, 0);
    const type = first.weight.dataType ?? 0;
    const base = `${first.node.name ?? first.node.output?.[0] ?? 'projection'}_merged`;
    const weight = this.#add(`${base}_int8`, type, [rows, total], concatColumns(group.map((p) => ({ bytes: rawBytes(p.weight) ?? new Uint8Array(), cols: p.cols })), rows, 1));
    const scale = this.#add(`${base}_scale`, onnx.TensorProto.DataType.FLOAT, [total], Float32Array.from(group.flatMap((p) => [...(floatValues(p.scale) ?? [])])));
    const zeroPoint = this.#add(`${base}_zero_point`, type, [total], Uint8Array.from(group.flatMap((p) => [...(rawBytes(p.zeroPoint) ?? [])])));
    const inputs = [first.node.input?.[0] ?? '', weight, scale, zeroPoint];
    if (first.bias !== undefined) inputs.push(this.#add(`${base}_bias`, onnx.TensorProto.DataType.FLOAT, [total], Float32Array.from(group.flatMap((p) => [...(floatValues(p.bias ?? {}) ?? [])]))));
    const product = freshName(this.#names, `${base}_output`);
    const merged: NodeProto = { name: base, opType: QUANTIZED_OP, domain: MS_DOMAIN, input: inputs, output: [product], attribute: [] };
    const outputs = group.map((p) => p.node.output?.[0] ?? '');
    const axis = { name: 'axis', type: onnx.AttributeProto.AttributeType.INT, i: -1 };
    const split: NodeProto =
      this.#opset >= 13
        ? { name: `${base}_split`, opType: 'Split', domain: '', input: [product, this.#add(`${base}_sizes`, onnx.TensorProto.DataType.INT64, [cols.length], new Uint8Array(BigInt64Array.from(cols.map(BigInt)).buffer))], output: outputs, attribute: [axis] }
        : { name: `${base}_split`, opType: 'Split', domain: '', input: [product], output: outputs, attribute: [axis, { name: 'split', type: onnx.AttributeProto.AttributeType.INTS, ints: cols }] };
    return [merged, split];
  }

  run(): void {
    const nodes = this.#graph.node ?? [];
    // Siblings: same activation input and the same storage, grouped in graph order.
    const groups = new Map<string, Projection[]>();
    for (const node of nodes) {
      const projection = this.#projection(node);
      if (projection === undefined) continue;
      const key = [node.input?.[0], projection.rows, projection.weight.dataType, projection.bias !== undefined].join('\u0000');
      groups.set(key, [...(groups.get(key) ?? []), projection]);
    }
    const placed = new Map<NodeProto, NodeProto[]>();
    const dropped = new Set<NodeProto>();
    for (const group of groups.values()) {
      if (group.length < 2) continue;
      // The merged node goes where the first sibling was: its input exists there, and every
      // sibling's readers come after their own node, so after the first one too.
      const [first, ...rest] = group;
      if (first === undefined) continue;
      placed.set(first.node, this.#merge(group));
      for (const p of rest) dropped.add(p.node);
      this.report.groups++;
      this.report.merged += group.length;
    }
    if (this.report.groups === 0) return;
    this.#graph.node = nodes.flatMap((node) => placed.get(node) ?? (dropped.has(node) ? [] : [node]));
    const read = new Set<string>();
    for (const node of this.#graph.node) for (const name of node.input ?? []) read.add(name);
    const outputs = new Set((this.#graph.output ?? []).map((o) => o.name ?? ''));
    // The siblings' own weights go unless something else still reads them.
    const siblingTensors = new Set<string>();
    for (const node of [...placed.keys(), ...dropped]) for (const name of (node.input ?? []).slice(1)) siblingTensors.add(name);
    const keep = (t: TensorProto): boolean => !siblingTensors.has(t.name ?? '') || read.has(t.name ?? '') || outputs.has(t.name ?? '');
    this.#graph.initializer = [...(this.#graph.initializer ?? []).filter(keep), ...this.#added];
  }
}

/** Merges sibling DynamicQuantizeMatMul nodes of `graph` in place (see the header). */
export function mergeProjections(graph: GraphProto, opset: number): MergeReport {
  const merger = new ProjectionMerger(graph, opset);
  merger.run();
  return merger.report;
}

