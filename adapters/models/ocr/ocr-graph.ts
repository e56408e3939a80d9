import { constantTensors, DataType, dimsOf, floatValues, freshName, rawTensor, tensorNames, toInt, type GraphProto, type ModelProto, type NodeProto, type TensorProto } from '../../quantize/onnx-file.js';

/**
 * Exact graph simplifications of PaddleOCR's paddle2onnx exports (pure; runs in the model thread
 * before the session is created). PP-LCNetV3, the backbone of the PP-OCRv4 detector and
 * recognizer, follows every convolution with a learnable scalar affine (`a·x + b`), a hard-swish
 * spelled as four ops (`x · clip(x + 3, 0, 6) / 6`) and a second scalar affine. onnxruntime runs
 * each as its own pass over the activations (and reorders them out of and back into its blocked
 * NCHWc conv layout around each): measured on the recognizer, 43 % of its time went to these
 * element-wise ops against 40 % to the convolutions. The rewrite removes them without changing
 * what the graph computes (up to float rounding):
 *
 * 1. `a · Conv(x) + b` → Conv with weights a·W and bias a·B + b.
 * 2. `x · clip(x + 3, 0, 6) / 6` → `x · HardSigmoid(x; 1/6, 1/2)` (opset 6, so the graph's opset
 *    is untouched): two passes instead of four.
 * 3. `Conv1×1(a · h + b)` (no padding, so the affine commutes exactly with the zero padding that
 *    does not exist) → Conv1×1(h) with weights a·W and bias B + b·ΣW.
 * 4. Any `a · h + b` left (before the padded depthwise convolutions, where a fold would be wrong
 *    at the borders) → BatchNormalization with scale a and bias b in every channel, mean 0 and
 *    variance + epsilon = 1: the same values. onnxruntime keeps a BatchNormalization inside its
 *    blocked NCHWc layout (it runs as a per-channel conv); a Mul and an Add of a scalar it does
 *    not, so each such affine cost a reorder out of NCHWc, two passes and a reorder back. On a
 *    recognizer batch of 8 × 640 columns (one thread, onnxruntime's profiler) the 16 of them
 *    took about 70 of 294 ms of kernel time; as BatchNormalization about 1 ms each.
 */

export interface FuseReport {
  /** Affines folded into the convolution before them. */
  affineIntoConv: number;
  /** Four-op hard-swishes turned into HardSigmoid × x. */
  hardSwish: number;
  /** Affines folded into the 1×1 convolution after them. */
  affineIntoPointwise: number;
  /** Affines left over, turned into per-channel BatchNormalization. */
  affineToBatchNorm: number;
}

const BN_EPSILON = 1e-5;
const NOTHING_FUSED: FuseReport = { affineIntoConv: 0, hardSwish: 0, affineIntoPointwise: 0, affineToBatchNorm: 0 };

class Fuser {
  readonly report: FuseReport = { ...NOTHING_FUSED };
  readonly #graph: GraphProto;
  /** Initializers and Constant node outputs (paddle2onnx keeps the affines' scalars as Constant nodes). */
  readonly #constants: Map<string, TensorProto>;
  readonly #names: Set<string>;
  readonly #added: TensorProto[] = [];
  #readers = new Map<string, NodeProto[]>();
  #producer = new Map<string, NodeProto>();
  #outputs = new Set<string>();
  #removed = new Set<NodeProto>();

  constructor(graph: GraphProto) {
    this.#graph = graph;
    this.#constants = constantTensors(graph, { constantNodes: true });
    this.#names = tensorNames(graph);
    this.#index();
  }

  #index(): void {
    this.#readers = new Map();
    this.#producer = new Map();
    this.#outputs = new Set((this.#graph.output ?? []).map((o) => o.name ?? ''));
    for (const node of this.#graph.node ?? []) {
      if (this.#removed.has(node)) continue;
      for (const name of node.input ?? []) {
        const list = this.#readers.get(name) ?? [];
        list.push(node);
        this.#readers.set(name, list);
      }
      for (const name of node.output ?? []) this.#producer.set(name, node);
    }
  }

  /** The one node reading `name` (and not a graph output), or undefined. */
  #soleReader(name: string): NodeProto | undefined {
    const readers = this.#readers.get(name) ?? [];
    return readers.length === 1 && !this.#outputs.has(name) ? readers[0] : undefined;
  }

  /** A constant with a single value (shape [] or [1]). */
  #scalar(name: string | undefined): number | undefined {
    const tensor = name === undefined ? undefined : this.#constants.get(name);
    if (tensor === undefined) return undefined;
    const values = floatValues(tensor);
    return values !== null && values.length === 1 ? values[0] : undefined;
  }

  /** `node` is `op(x, scalar)` in either order: returns x's name and the scalar. */
  #withScalar(node: NodeProto | undefined, op: string): { input: string; value: number } | undefined {
    if (node === undefined || node.opType !== op || (node.domain ?? '') !== '' || (node.input ?? []).length !== 2) return undefined;
    const [left = '', right = ''] = node.input ?? [];
    const r = this.#scalar(right);
    if (r !== undefined && this.#scalar(left) === undefined) return { input: left, value: r };
    const l = this.#scalar(left);
    if (l !== undefined && r === undefined && op !== 'Div' && op !== 'Sub') return { input: right, value: l };
    return undefined;
  }

  #addFloat(base: string, dims: number[], values: Float32Array): string {
    const tensor = rawTensor(freshName(this.#names, base), DataType.FLOAT, dims, values);
    this.#added.push(tensor);
    // Registered as a constant too: a later fold may read the weights an earlier one wrote.
    this.#constants.set(tensor.name ?? '', tensor);
    return tensor.name ?? '';
  }

  /** Weight [O, I, kh, kw] and bias [O] of a plain float Conv with constant weights. */
  #convWeights(conv: NodeProto): { weight: Float32Array; dims: number[]; bias: Float32Array } | undefined {
    const [, w, b] = conv.input ?? [];
    const wTensor = w === undefined ? undefined : this.#constants.get(w);
    const weight = wTensor === undefined ? null : floatValues(wTensor);
    if (wTensor === undefined || weight === null) return undefined;
    const dims = dimsOf(wTensor);
    const outChannels = dims[0] ?? 0;
    if (dims.length !== 4 || outChannels <= 0) return undefined;
    if (b === undefined || b === '') return { weight, dims, bias: new Float32Array(outChannels) };
    const bTensor = this.#constants.get(b);
    const bias = bTensor === undefined ? null : floatValues(bTensor);
    return bias === null || bias.length !== outChannels ? undefined : { weight, dims, bias };
  }

  #setConv(conv: NodeProto, weight: Float32Array, dims: number[], bias: Float32Array): void {
    const [x = ''] = conv.input ?? [];
    const base = conv.output?.[0] ?? 'conv';
    conv.input = [x, this.#addFloat(`${base}_fused_w`, dims, weight), this.#addFloat(`${base}_fused_b`, [bias.length], bias)];
  }

  /** 1: Conv → Mul(a) → Add(b). */
  #foldAfterConv(conv: NodeProto): boolean {
    const [out = ''] = conv.output ?? [];
    const mulNode = this.#soleReader(out);
    const mul = this.#withScalar(mulNode, 'Mul');
    const mulOut = mulNode?.output?.[0] ?? '';
    const addNode = mul === undefined ? undefined : this.#soleReader(mulOut);
    const add = this.#withScalar(addNode, 'Add');
    const parts = this.#convWeights(conv);
    if (mulNode === undefined || mul === undefined || addNode === undefined || add === undefined || parts === undefined) return false;
    const weight = parts.weight.map((v) => v * mul.value);
    const bias = parts.bias.map((v) => v * mul.value + add.value);
    this.#setConv(conv, weight, parts.dims, bias);
    conv.output = [...(addNode.output ?? [])];
    this.#removed.add(mulNode).add(addNode);
    this.report.affineIntoConv++;
    return true;
  }

  /** Clip bounds as attributes (opset < 11) or as constant inputs (opset ≥ 11). */
  #clipsTo(clip: NodeProto, low: number, high: number): boolean {
    const inputs = clip.input ?? [];
    if (inputs.length === 1) {
      return clip.attribute?.find((a) => a.name === 'min')?.f === low && clip.attribute?.find((a) => a.name === 'max')?.f === high;
    }
    return inputs.length === 3 && this.#scalar(inputs[1]) === low && this.#scalar(inputs[2]) === high;
  }

  /** 2: Add(x, 3) → Clip(0, 6) → Mul(x, ·) → Div(6), seen from the Add. */
  #hardSwish(add: NodeProto): boolean {
    const shifted = this.#withScalar(add, 'Add');
    if (shifted === undefined || shifted.value !== 3) return false;
    const clip = this.#soleReader(add.output?.[0] ?? '');
    if (clip === undefined || clip.opType !== 'Clip' || !this.#clipsTo(clip, 0, 6)) return false;
    const mul = this.#soleReader(clip.output?.[0] ?? '');
    const [l, r] = mul?.input ?? [];
    if (mul === undefined || mul.opType !== 'Mul' || !((l === shifted.input && r === clip.output?.[0]) || (r === shifted.input && l === clip.output?.[0]))) return false;
    const divNode = this.#soleReader(mul.output?.[0] ?? '') ?? undefined;
    const div = this.#withScalar(divNode, 'Div');
    if (divNode === undefined || div === undefined || div.value !== 6 || div.input !== mul.output?.[0]) return false;
    const gate = freshName(this.#names, `${divNode.output?.[0] ?? 'hardswish'}_gate`);
    add.opType = 'HardSigmoid';
    add.input = [shifted.input];
    add.output = [gate];
    add.attribute = [
      { name: 'alpha', type: 1, f: 1 / 6 },
      { name: 'beta', type: 1, f: 0.5 },
    ];
    mul.input = [shifted.input, gate];
    mul.output = [...(divNode.output ?? [])];
    this.#removed.add(clip).add(divNode);
    this.report.hardSwish++;
    return true;
  }

  /** 3: Mul(a) → Add(b) → Conv 1×1 without padding, seen from the Mul. */
  #foldIntoPointwise(mulNode: NodeProto): boolean {
    const mul = this.#withScalar(mulNode, 'Mul');
    const addNode = mul === undefined ? undefined : this.#soleReader(mulNode.output?.[0] ?? '');
    const add = this.#withScalar(addNode, 'Add');
    const conv = addNode === undefined ? undefined : this.#soleReader(addNode.output?.[0] ?? '');
    if (mul === undefined || addNode === undefined || add === undefined || conv === undefined || conv.opType !== 'Conv') return false;
    if (conv.input?.[0] !== addNode.output?.[0]) return false;
    const attr = (name: string): number[] => (conv.attribute?.find((a) => a.name === name)?.ints ?? []).map((v) => toInt(v));
    const group = toInt(conv.attribute?.find((a) => a.name === 'group')?.i, 1);
    const autoPad = conv.attribute?.find((a) => a.name === 'auto_pad')?.s;
    const parts = this.#convWeights(conv);
    if (parts === undefined || group !== 1 || parts.dims[2] !== 1 || parts.dims[3] !== 1) return false;
    if (attr('pads').some((p) => p !== 0) || (autoPad !== undefined && autoPad !== null && new TextDecoder().decode(autoPad) !== 'NOTSET')) return false;
    const [outChannels = 0, inChannels = 0] = parts.dims;
    const weight = parts.weight.map((v) => v * mul.value);
    const bias = Float32Array.from(parts.bias);
    for (let o = 0; o < outChannels; o++) {
      let sum = 0;
      for (let i = 0; i < inChannels; i++) sum += parts.weight[o * inChannels + i] ?? 0;
      bias[o] = (bias[o] ?? 0) + add.value * sum;
    }
    this.#setConv(conv, weight, parts.dims, bias);
    conv.input = [mul.input, ...(conv.input ?? []).slice(1)];
    this.#removed.add(mulNode).add(addNode);
    this.report.affineIntoPointwise++;
    return true;
  }

  /**
   * Channels of a convolution's output, directly or through the `x · gate` of a hard-swish; the
   * tensors a BatchNormalization may take (4-D, channels on axis 1). undefined otherwise.
   */
  #convChannels(name: string): number | undefined {
    let producer = this.#producer.get(name);
    if (producer?.opType === 'Mul' && (producer.domain ?? '') === '') {
      // Only x · gate(x): a gated activation keeps x's shape, a broadcast product might not.
      const [x = '', gate = ''] = producer.input ?? [];
      const gated = (value: string, by: string): boolean => {
        const node = this.#producer.get(by);
        return node !== undefined && ['HardSigmoid', 'Sigmoid'].includes(node.opType ?? '') && node.input?.[0] === value;
      };
      const conv = gated(x, gate) ? x : gated(gate, x) ? gate : undefined;
      producer = conv === undefined ? undefined : this.#producer.get(conv);
    }
    if (producer === undefined || producer.opType !== 'Conv' || (producer.domain ?? '') !== '') return undefined;
    return this.#convWeights(producer)?.dims[0];
  }

  /** 4: Mul(a) → Add(b) on a convolution's channels, seen from the Mul. */
  #affineToBatchNorm(mulNode: NodeProto): boolean {
    const mul = this.#withScalar(mulNode, 'Mul');
    const addNode = mul === undefined ? undefined : this.#soleReader(mulNode.output?.[0] ?? '');
    const add = this.#withScalar(addNode, 'Add');
    if (mul === undefined || addNode === undefined || add === undefined || add.input !== mulNode.output?.[0]) return false;
    const channels = this.#convChannels(mul.input);
    if (channels === undefined || channels <= 0) return false;
    const base = addNode.output?.[0] ?? 'affine';
    const filled = (what: string, value: number): string => this.#addFloat(`${base}_${what}`, [channels], new Float32Array(channels).fill(value));
    addNode.opType = 'BatchNormalization';
    // variance + epsilon = 1 with ONNX's default epsilon: some providers (cuDNN) refuse a smaller one.
    addNode.input = [mul.input, filled('scale', mul.value), filled('bias', add.value), filled('mean', 0), filled('var', 1 - BN_EPSILON)];
    addNode.attribute = [{ name: 'epsilon', type: 1, f: BN_EPSILON }];
    this.#removed.add(mulNode);
    this.report.affineToBatchNorm++;
    return true;
  }

  #pass(step: (node: NodeProto) => boolean, op: string): void {
    for (const node of this.#graph.node ?? []) {
      if (this.#removed.has(node) || node.opType !== op || (node.domain ?? '') !== '') continue;
      // Each fold rewires names: re-index so later matches see the current graph.
      if (step(node)) this.#index();
    }
  }

  run(): void {
    this.#pass((node) => this.#foldAfterConv(node), 'Conv');
    this.#pass((node) => this.#hardSwish(node), 'Add');
    this.#pass((node) => this.#foldIntoPointwise(node), 'Mul');
    this.#pass((node) => this.#affineToBatchNorm(node), 'Mul');
    this.#graph.node = (this.#graph.node ?? []).filter((node) => !this.#removed.has(node));
    // Constants only the replaced weights read go with them.
    this.#index();
    this.#graph.node = this.#graph.node.filter((node) => node.opType !== 'Constant' || (node.output ?? []).some((name) => this.#readers.has(name) || this.#outputs.has(name)));
    // A convolution folded twice leaves its first folded weights unread.
    this.#graph.initializer = [...(this.#graph.initializer ?? []), ...this.#added.filter((tensor) => this.#readers.has(tensor.name ?? ''))];
  }
}

/** Rewrites `model` in place; returns what was fused (all zeros for a graph without these patterns). */
export function fusePaddleGraph(model: ModelProto): FuseReport {
  const graph = model.graph;
  if (graph === null || graph === undefined) return { ...NOTHING_FUSED };
  const fuser = new Fuser(graph);
  fuser.run();
  return fuser.report;
}

/** Outputs addBestClass gives the recognizer: per step, the best class and its probability. */
export const BEST_CLASS_OUTPUTS = { index: 'shoal_best_class', prob: 'shoal_best_prob' } as const;

/**
 * Adds ArgMax and ReduceMax over the classes of a recognizer's [n, steps, classes] output as two
 * more graph outputs (the original stays, so its class count can still be read). Greedy CTC
 * needs only these: fetching them instead of the probabilities saves copying n × steps × 6,625
 * floats out of onnxruntime per batch (about 310 MB on the Federal Register page) and the
 * argmax in JavaScript; both ops keep the first of equal maxima, like ctcDecode. Run + decode,
 * 2 threads, paired runs: 0.94 of the time on a random 8 × 640-column batch, 0.97 (median of
 * 72) on the Federal Register page's own batches, with the same readings. Returns
 * false, leaving the graph as it was, for any other output layout, or from opset 18 on (where
 * ReduceMax reads its axes from an input).
 */
export function addBestClass(model: ModelProto): boolean {
  const graph = model.graph;
  const outputs = graph?.output ?? [];
  const output = outputs[0];
  const tensorType = output?.type?.tensorType;
  const dims = tensorType?.shape?.dim ?? [];
  const opset = model.opsetImport?.find((entry) => (entry.domain ?? '') === '')?.version;
  const version = opset === undefined || opset === null ? 0 : toInt(opset);
  if (graph === null || graph === undefined || outputs.length !== 1 || output?.name === undefined || output.name === null) return false;
  if (tensorType?.elemType !== DataType.FLOAT || dims.length !== 3 || version < 1 || version >= 18) return false;
  const names = tensorNames(graph);
  if (names.has(BEST_CLASS_OUTPUTS.index) || names.has(BEST_CLASS_OUTPUTS.prob)) return false;
  const probs = output.name;
  const perStep = [dims[0] ?? {}, dims[1] ?? {}];
  graph.node = [
    ...(graph.node ?? []),
    { opType: 'ArgMax', name: BEST_CLASS_OUTPUTS.index, input: [probs], output: [BEST_CLASS_OUTPUTS.index], attribute: [{ name: 'axis', type: 2, i: 2 }, { name: 'keepdims', type: 2, i: 0 }] },
    { opType: 'ReduceMax', name: BEST_CLASS_OUTPUTS.prob, input: [probs], output: [BEST_CLASS_OUTPUTS.prob], attribute: [{ name: 'axes', type: 7, ints: [2] }, { name: 'keepdims', type: 2, i: 0 }] },
  ];
  graph.output = [
    ...outputs,
    { name: BEST_CLASS_OUTPUTS.index, type: { tensorType: { elemType: DataType.INT64, shape: { dim: perStep } } } },
    { name: BEST_CLASS_OUTPUTS.prob, type: { tensorType: { elemType: DataType.FLOAT, shape: { dim: perStep } } } },
  ];
  return true;
}
