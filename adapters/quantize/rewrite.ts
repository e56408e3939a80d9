import { MS_DOMAIN, QUANTIZED_OP } from './contrib-ops.js';
import { fuseAttention } from './fuse-attention.js';
import { quantizeColumns, storedWeights, transpose, allFinite, weightZeroPoint, type WeightFormat } from './int8-weights.js';
import { mergeProjections } from './merge-projections.js';
import {
  attributeOf,
  consumedNames,
  constantTensors,
  DataType,
  defaultOpset,
  dimsOf,
  elementCount,
  floatValues,
  freshName,
  rawTensor,
  tensorNames,
  toInt,
  type GraphProto,
  type ModelProto,
  type NodeProto,
  type TensorProto,
} from './onnx-file.js';

/**
 * The graph rewrite: every MatMul (and Gemm) whose weight is a constant float initializer W[K, N]
 * becomes onnxruntime's `com.microsoft.DynamicQuantizeMatMul(A, W, scale[N], zero_point[N], bias?)`.
 * The activations A are quantized to uint8 per call by the runtime; the weights are symmetric
 * per-column int8 codes, stored as uint8 with zero point 128 or as int8 (why: `WeightFormat`). Everything else (embedding Gathers, LayerNorm, attention's
 * activation × activation MatMuls, small weights) stays float. Graph inputs and outputs keep their
 * names, types and shapes; the rewrite is a pure function of the model and the options.
 */

export { MS_DOMAIN, QUANTIZED_OP } from './contrib-ops.js';

export interface RewriteOptions {
  /** Weights with fewer elements stay float (their matmuls are too small to gain). */
  minWeightElements: number;
  /** How the codes are stored (see `WeightFormat`); default `uint8`, exact on every CPU. */
  weights?: WeightFormat;
  /** Merge sibling projections that read one activation (Q/K/V) into one node (merge-projections.ts); default false. */
  mergeProjections?: boolean;
  /** Replace eager self-attention blocks by MultiHeadAttention nodes (fuse-attention.ts); default false. */
  fuseAttention?: boolean;
}

export interface RewriteReport {
  /** MatMul nodes rewritten. */
  matmul: number;
  /** Gemm nodes rewritten. */
  gemm: number;
  /** Constant-weight matmuls left float because the weight is small. */
  skippedSmall: number;
  /** Constant-weight matmuls left float for another reason (not 2-D, not finite, transA...). */
  skippedOther: number;
  /** Bytes of the float weights that were replaced, and of their int8 + scale replacements. */
  floatWeightBytes: number;
  int8WeightBytes: number;
  /** Sibling groups merged into one DynamicQuantizeMatMul (and the nodes they had). */
  mergedGroups: number;
  mergedNodes: number;
  /** Attention blocks fused into MultiHeadAttention. */
  fusedAttention: number;
}

interface ConstantWeight {
  /** The float initializer holding the weight. */
  source: string;
  stored: Float32Array;
  storedDims: [number, number];
  /** The node reads the initializer through a Transpose. */
  transposed: boolean;
}

interface QuantizedWeight {
  values: string;
  scales: string;
  zeroPoints: string;
}


function floatAttribute(node: NodeProto, name: string, fallback: number): number {
  const attribute = attributeOf(node, name);
  return attribute?.f === null || attribute?.f === undefined ? fallback : attribute.f;
}

function intAttribute(node: NodeProto, name: string, fallback: number): number {
  const attribute = attributeOf(node, name);
  return attribute?.i === null || attribute?.i === undefined ? fallback : toInt(attribute.i);
}

const EMPTY_REPORT: RewriteReport = { matmul: 0, gemm: 0, skippedSmall: 0, skippedOther: 0, floatWeightBytes: 0, int8WeightBytes: 0, mergedGroups: 0, mergedNodes: 0, fusedAttention: 0 };

class GraphRewriter {
  readonly report: RewriteReport = { ...EMPTY_REPORT };
  readonly #graph: GraphProto;
  readonly #options: RewriteOptions;
  /** The graph's initializers as read (the tensors this rewrite adds are not looked up). */
  readonly #initializers: Map<string, TensorProto>;
  readonly #names: Set<string>;
  readonly #added: TensorProto[] = [];
  readonly #quantized = new Map<string, QuantizedWeight>();
  /** Float initializers that some node now reads in int8 form. */
  readonly #replaced = new Set<string>();
  /** Transpose nodes that fed a weight to a rewritten node (dropped once nothing reads them). */
  readonly #transposes = new Set<NodeProto>();
  readonly #producers = new Map<string, NodeProto>();
  /** Output columns (N) of each DynamicQuantizeMatMul this rewrite created. */
  readonly #columns = new Map<NodeProto, number>();

  constructor(graph: GraphProto, options: RewriteOptions) {
    this.#graph = graph;
    this.#options = options;
    this.#initializers = constantTensors(graph, { constantNodes: false });
    this.#names = tensorNames(graph);
    for (const node of graph.node ?? []) for (const name of node.output ?? []) this.#producers.set(name, node);
  }

  /** A new initializer under a name no tensor of the graph uses yet, derived from `base`. */
  #add(base: string, dataType: number, dims: number[], values: Float32Array | Int8Array | Uint8Array): string {
    const tensor = rawTensor(freshName(this.#names, base), dataType, dims, values);
    this.#added.push(tensor);
    return tensor.name ?? '';
  }

  #addFloat(base: string, dims: number[], values: Float32Array): string {
    return this.#add(base, DataType.FLOAT, dims, values);
  }

  /**
   * A constant float 2-D weight big enough to quantize, or the reason it is left alone. The weight
   * is an initializer, or an initializer behind a 2-D Transpose (exports without constant folding
   * store Linear weights as [N, K] and transpose them in the graph).
   */
  #weight(name: string | undefined): ConstantWeight | 'small' | 'other' | null {
    if (name === undefined) return null;
    let source = name;
    let transposed = false;
    const producer = this.#producers.get(name);
    if (!this.#initializers.has(name) && producer !== undefined && producer.opType === 'Transpose' && (producer.domain ?? '') === '') {
      const perm = attributeOf(producer, 'perm')?.ints?.map((v) => toInt(v));
      if (perm !== undefined && !(perm.length === 2 && perm[0] === 1 && perm[1] === 0)) return null;
      source = producer.input?.[0] ?? '';
      transposed = true;
    }
    const tensor = this.#initializers.get(source);
    if (tensor === undefined || tensor.dataType !== DataType.FLOAT) return null;
    const dims = dimsOf(tensor);
    if (dims.length !== 2) return 'other';
    const [rows = 0, cols = 0] = dims;
    if (elementCount(tensor) < Math.max(1, this.#options.minWeightElements)) return 'small';
    const values = floatValues(tensor);
    if (values === null || !allFinite(values)) return 'other';
    if (transposed && producer !== undefined) this.#transposes.add(producer);
    return { source, stored: values, storedDims: [rows, cols], transposed };
  }

  /** The weight as the [K, N] matrix the product uses; `flip` adds one more transposition (Gemm transB). */
  #matrix(weight: ConstantWeight, flip: boolean): { values: Float32Array; rows: number; cols: number; variant: string } {
    const [rows, cols] = weight.storedDims;
    if (weight.transposed === flip) return { values: weight.stored, rows, cols, variant: '' };
    return { values: transpose(weight.stored, rows, cols), rows: cols, cols: rows, variant: '_t' };
  }

  /** The int8 weight and scales of W[K, N] (memoized: a weight shared by several nodes is quantized once). */
  #quantize(source: string, variant: string, weight: Float32Array, rows: number, cols: number, scaleFactor: number): QuantizedWeight {
    this.#replaced.add(source);
    const key = `${source}${variant}`;
    const known = this.#quantized.get(key);
    if (known !== undefined) return known;
    const { values, scales } = quantizeColumns(weight, rows, cols, scaleFactor);
    const format = this.#options.weights ?? 'uint8';
    const type = format === 'int8' ? DataType.INT8 : DataType.UINT8;
    const zeroPoints = format === 'int8' ? new Int8Array(cols) : new Uint8Array(cols).fill(weightZeroPoint(format));
    const valuesName = this.#add(`${key}_int8`, type, [rows, cols], storedWeights(values, format));
    const scalesName = this.#addFloat(`${key}_scale`, [cols], scales);
    const zeroPointsName = this.#add(`${key}_zero_point`, type, [cols], zeroPoints);
    const quantized = { values: valuesName, scales: scalesName, zeroPoints: zeroPointsName };
    this.#quantized.set(key, quantized);
    this.report.floatWeightBytes += rows * cols * 4;
    this.report.int8WeightBytes += rows * cols + cols * 5;
    return quantized;
  }

  /** `node` (same name and outputs) as a DynamicQuantizeMatMul reading `inputs`. */
  #quantizedNode(node: NodeProto, inputs: string[], cols: number): NodeProto {
    const created: NodeProto = { ...node, opType: QUANTIZED_OP, domain: MS_DOMAIN, input: inputs, attribute: [] };
    this.#columns.set(created, cols);
    return created;
  }

  #skip(reason: 'small' | 'other' | null): void {
    if (reason === 'small') this.report.skippedSmall++;
    else if (reason === 'other') this.report.skippedOther++;
  }

  #matmul(node: NodeProto): NodeProto[] {
    const [a, b] = node.input ?? [];
    const weight = this.#weight(b);
    if (a === undefined || b === undefined || weight === null || typeof weight === 'string') {
      this.#skip(typeof weight === 'string' ? weight : null);
      return [node];
    }
    const { values, rows, cols, variant } = this.#matrix(weight, false);
    const q = this.#quantize(weight.source, variant, values, rows, cols, 1);
    this.report.matmul++;
    return [this.#quantizedNode(node, [a, q.values, q.scales, q.zeroPoints], cols)];
  }

  /**
   * Gemm(A, B, C) = alpha·A·op(B) + beta·C with 2-D A. alpha is folded into the scales; beta·C
   * becomes the bias input when it is a constant [N] (or [1, N]) vector, else a following Add.
   */
  #gemm(node: NodeProto): NodeProto[] {
    const [a, b, c] = node.input ?? [];
    const [output] = node.output ?? [];
    const weight = this.#weight(b);
    if (a === undefined || b === undefined || output === undefined || weight === null || typeof weight === 'string') {
      this.#skip(typeof weight === 'string' ? weight : null);
      return [node];
    }
    const alpha = floatAttribute(node, 'alpha', 1);
    const beta = floatAttribute(node, 'beta', 1);
    const transB = intAttribute(node, 'transB', 0) !== 0;
    const hasBias = c !== undefined && c !== '';
    const biasTensor = hasBias ? this.#initializers.get(c) : undefined;
    if (intAttribute(node, 'transA', 0) !== 0 || (hasBias && biasTensor === undefined && beta !== 1)) {
      this.report.skippedOther++;
      return [node];
    }
    const { values, cols, rows, variant } = this.#matrix(weight, transB);
    const q = this.#quantize(weight.source, `${variant}${alpha === 1 ? '' : `_a${alpha}`}`, values, rows, cols, alpha);
    this.report.gemm++;
    const inputs = [a, q.values, q.scales, q.zeroPoints];
    if (!hasBias) return [this.#quantizedNode(node, inputs, cols)];

    const biasValues = biasTensor === undefined ? null : floatValues(biasTensor);
    const biasDims = biasTensor === undefined ? [] : dimsOf(biasTensor);
    const isRow = biasValues !== null && biasValues.length === cols && (biasDims.length === 1 || (biasDims.length === 2 && biasDims[0] === 1));
    if (isRow) {
      const scaled = biasValues.map((v) => Math.fround(v * beta));
      const name = beta === 1 && biasDims.length === 1 ? c : this.#addFloat(`${c}_bias`, [cols], scaled);
      return [this.#quantizedNode(node, [...inputs, name], cols)];
    }
    // C of another shape (or not constant): add it after the product, with beta folded into a constant C.
    let addend = c;
    if (beta !== 1 && biasValues !== null) addend = this.#addFloat(`${c}_beta`, biasDims, biasValues.map((v) => Math.fround(v * beta)));
    const product = freshName(this.#names, `${output}_int8_product`);
    const nodeName = node.name ?? output;
    return [
      this.#quantizedNode({ ...node, output: [product] }, inputs, cols),
      { name: `${nodeName}_bias_add`, opType: 'Add', domain: '', input: [product, addend], output: [output], attribute: [] },
    ];
  }

  run(): void {
    const rewritten: NodeProto[] = [];
    for (const node of this.#graph.node ?? []) {
      const domain = node.domain ?? '';
      if (domain === '' && node.opType === 'MatMul') rewritten.push(...this.#matmul(node));
      else if (domain === '' && node.opType === 'Gemm') rewritten.push(...this.#gemm(node));
      else rewritten.push(node);
    }
    this.#graph.node = this.#foldBiases(rewritten);
    this.#dropDeadTransposes();
    this.#dropUnused();
  }

  /**
   * `DynamicQuantizeMatMul → Add(constant [N])` (how PyTorch exports a Linear layer) becomes one
   * node with the bias as its fifth input, so the runtime adds it inside the int8 kernel.
   */
  #foldBiases(nodes: NodeProto[]): NodeProto[] {
    const readers = new Map<string, number>();
    consumedNames({ node: nodes }, readers);
    const outputs = new Set((this.#graph.output ?? []).map((o) => o.name ?? ''));
    const producers = new Map<string, NodeProto>();
    for (const node of nodes) {
      const [output] = node.output ?? [];
      if (this.#columns.has(node) && (node.input ?? []).length === 4 && output !== undefined) producers.set(output, node);
    }
    const folded = new Set<NodeProto>();
    const result: NodeProto[] = [];
    for (const node of nodes) {
      const [left = '', right = ''] = node.input ?? [];
      const [output] = node.output ?? [];
      const product = producers.has(left) ? left : producers.has(right) ? right : undefined;
      const producer = product === undefined ? undefined : producers.get(product);
      const biasName = product === left ? right : left;
      const bias = this.#initializers.get(biasName);
      const cols = producer === undefined ? undefined : this.#columns.get(producer);
      const usable =
        node.opType === 'Add' && (node.domain ?? '') === '' && (node.input ?? []).length === 2 && output !== undefined &&
        product !== undefined && producer !== undefined && !folded.has(producer) && readers.get(product) === 1 && !outputs.has(product) &&
        bias !== undefined && bias.dataType === DataType.FLOAT && dimsOf(bias).length === 1 && dimsOf(bias)[0] === cols;
      if (!usable) {
        result.push(node);
        continue;
      }
      // The product node reads (A, W, scale, zero point): the bias is its fifth input.
      producer.input = [...(producer.input ?? []), biasName];
      producer.output = [output];
      folded.add(producer);
    }
    return result;
  }

  #dropDeadTransposes(): void {
    const readers = new Map<string, number>();
    consumedNames(this.#graph, readers);
    const outputs = new Set((this.#graph.output ?? []).map((o) => o.name ?? ''));
    const dead = (node: NodeProto): boolean =>
      this.#transposes.has(node) && (node.output ?? []).every((name) => !readers.has(name) && !outputs.has(name));
    this.#graph.node = (this.#graph.node ?? []).filter((node) => !dead(node));
  }

  /**
   * Float weights nothing reads any more are dropped (old IR 3 exports also list initializers as
   * graph inputs: those entries go with them, they were never inputs a caller feeds).
   */
  #dropUnused(): void {
    const used = new Map<string, number>();
    consumedNames(this.#graph, used);
    const outputs = new Set((this.#graph.output ?? []).map((o) => o.name ?? ''));
    const keep = (tensor: TensorProto): boolean => {
      const name = tensor.name ?? '';
      return !this.#replaced.has(name) || used.has(name) || outputs.has(name);
    };
    const dropped = new Set((this.#graph.initializer ?? []).filter((t) => !keep(t)).map((t) => t.name ?? ''));
    this.#graph.initializer = [...(this.#graph.initializer ?? []).filter(keep), ...this.#added];
    this.#graph.input = (this.#graph.input ?? []).filter((i) => !dropped.has(i.name ?? ''));
  }
}

/** Whether the graph already contains integer kernels (a shipped `_quantized` export, or our own output). */
export function isQuantizedGraph(model: ModelProto): boolean {
  const integerOps = new Set(['MatMulInteger', 'DynamicQuantizeMatMul', 'QLinearMatMul', 'DynamicQuantizeLinear', 'QuantizeLinear', 'MatMulNBits', 'QAttention', 'QGemm', 'MatMulIntegerToFloat', 'ConvInteger', 'QLinearConv']);
  return (model.graph?.node ?? []).some((node) => integerOps.has(node.opType ?? ''));
}

/**
 * Rewrites `model` in place and returns what changed. Adds the com.microsoft opset import only
 * when something was rewritten, so an untouched model stays byte-identical in meaning.
 */
export function quantizeModel(model: ModelProto, options: RewriteOptions): RewriteReport {
  const graph = model.graph;
  if (graph === null || graph === undefined) return { ...EMPTY_REPORT };
  const rewriter = new GraphRewriter(graph, options);
  rewriter.run();
  const report = rewriter.report;
  if (report.matmul + report.gemm > 0) {
    const opset = defaultOpset(model, 1);
    if (options.mergeProjections === true) {
      const merged = mergeProjections(graph, opset);
      report.mergedGroups = merged.groups;
      report.mergedNodes = merged.merged;
    }
    if (options.fuseAttention === true) report.fusedAttention = fuseAttention(graph, opset).fused;
    const imports = model.opsetImport ?? [];
    if (!imports.some((entry) => entry.domain === MS_DOMAIN)) model.opsetImport = [...imports, { domain: MS_DOMAIN, version: 1 }];
  }
  return report;
}
