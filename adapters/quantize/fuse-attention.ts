import { ATTENTION_OP, MS_DOMAIN } from './contrib-ops.js';
import { attributeOf, consumedNames, constantTensors, DataType, elementCount, floatValues, freshName, integerValues, onnx, tensorNames, toInt, type AttributeProto, type GraphProto, type NodeProto, type TensorProto } from './onnx-file.js';

/**
 * Self-attention fusion: the eager attention block a BERT-style export spells out op by op
 *
 *   Q, K, V [B, S, H·d] → Reshape [B, S, H, d] → Transpose (K: [0,2,3,1], Q/V: [0,2,1,3])
 *   → MatMul(Q, Kᵀ) → Div(√d) or Mul(1/√d) → Add(padding mask) → Softmax(last axis)
 *   → MatMul(·, V) → Transpose [0,2,1,3] → Reshape [B, S, H·d]
 *
 * becomes one onnxruntime `com.microsoft.MultiHeadAttention(Q, K, V, key_padding_mask)` node.
 * Why: after the int8 rewrite the projections are fast, and these float ops were 40 % of an int8
 * MiniLM's kernel time (the mask Add and Softmax each pass over B·H·S² scores, the transposes
 * copy Q, K, V and the context); onnxruntime's own attention fusion does not match graphs whose
 * projections are already `DynamicQuantizeMatMul` nodes. The fused kernel does the same
 * arithmetic (scaled dot products, additive mask, softmax, weighted sum) per batch and head.
 *
 * Matched strictly, and left alone otherwise: the padding mask must be the HF extended mask of a
 * rank-2 graph input, `(1 − Cast(Unsqueeze(mask)))·c` (c becomes `mask_filter_value`), or absent;
 * the scale a scalar constant; every intermediate read once and not a graph output (so attention
 * probabilities requested as an output keep the block unfused). Shape plumbing left without
 * readers (Shape/Gather/Concat of the Reshapes, the mask's float chain) is dropped after.
 */


const INT = onnx.AttributeProto.AttributeType.INT;
const FLOAT = onnx.AttributeProto.AttributeType.FLOAT;

export interface AttentionFusionReport {
  /** Attention blocks replaced by one MultiHeadAttention node. */
  fused: number;
  /** Softmax nodes that looked like attention but did not match every condition. */
  unmatched: number;
}

function ints(node: NodeProto, name: string): number[] | undefined {
  return attributeOf(node, name)?.ints?.map((v) => toInt(v));
}

function samePerm(node: NodeProto, perm: readonly number[]): boolean {
  const found = ints(node, 'perm');
  return found !== undefined && found.length === perm.length && found.every((v, i) => v === perm[i]);
}

/** A plain-domain node of type `op`, or undefined. */
function isOp(node: NodeProto | undefined, op: string): node is NodeProto {
  return node !== undefined && node.opType === op && (node.domain ?? '') === '';
}

class AttentionFuser {
  readonly report: AttentionFusionReport = { fused: 0, unmatched: 0 };
  readonly #graph: GraphProto;
  readonly #opset: number;
  readonly #producers = new Map<string, NodeProto>();
  /**
   * Readers of each name other than Shape nodes: exports compute the Reshapes' target shapes from
   * Shape(x), and those readers die with the block (checked after: `#danglingReads`).
   */
  readonly #readers = new Map<string, number>();
  /** The first top-level non-Shape node reading each name (enough wherever `#readers` says one does). */
  readonly #firstReader = new Map<string, NodeProto>();
  readonly #outputs: Set<string>;
  readonly #constants: Map<string, TensorProto>;
  readonly #names: Set<string>;
  readonly #inputRanks = new Map<string, number>();
  /** Nodes replaced by a fused node (removed after the scan). */
  readonly #removed = new Set<NodeProto>();
  /** Final Reshape of each fused block → its MultiHeadAttention replacement. */
  readonly #replacements = new Map<NodeProto, NodeProto>();
  /** The int32 copy of each mask input, created once and shared by every layer. */
  readonly #intMasks = new Map<string, { name: string; cast: NodeProto }>();

  constructor(graph: GraphProto, opset: number) {
    this.#graph = graph;
    this.#opset = opset;
    for (const node of graph.node ?? []) {
      for (const name of node.output ?? []) this.#producers.set(name, node);
      for (const name of node.input ?? []) {
        if (name === '' || isOp(node, 'Shape')) continue;
        this.#readers.set(name, (this.#readers.get(name) ?? 0) + 1);
        if (!this.#firstReader.has(name)) this.#firstReader.set(name, node);
      }
      // Subgraphs (If/Loop bodies) reading outer names count as readers too.
      for (const a of node.attribute ?? []) {
        if (a.g != null) consumedNames(a.g, this.#readers);
        for (const sub of a.graphs ?? []) consumedNames(sub, this.#readers);
      }
    }
    this.#outputs = new Set((graph.output ?? []).map((o) => o.name ?? ''));
    this.#constants = constantTensors(graph, { constantNodes: true });
    this.#names = tensorNames(graph);
    for (const input of graph.input ?? []) {
      const dims = input.type?.tensorType?.shape?.dim;
      if (dims !== null && dims !== undefined) this.#inputRanks.set(input.name ?? '', dims.length);
    }
  }

  /** The node producing `name`, provided `name` is read by exactly one node and is no graph output. */
  #privateProducer(name: string | undefined): NodeProto | undefined {
    if (name === undefined || this.#readers.get(name) !== 1 || this.#outputs.has(name)) return undefined;
    return this.#producers.get(name);
  }

  /** The one node reading `name`, when exactly one does and it is no graph output. */
  #onlyReader(name: string | undefined): NodeProto | undefined {
    if (name === undefined || this.#readers.get(name) !== 1 || this.#outputs.has(name)) return undefined;
    return this.#firstReader.get(name);
  }

  #scalar(name: string | undefined): number | undefined {
    const tensor = name === undefined ? undefined : this.#constants.get(name);
    if (tensor === undefined || elementCount(tensor) !== 1) return undefined;
    if (tensor.dataType === DataType.FLOAT) return floatValues(tensor)?.[0];
    const values = integerValues(tensor);
    return values?.[0];
  }

  /** The constant integer values of a shape operand: a constant tensor, or a Concat of one-element constants. */
  #shapeTail(name: string | undefined): [number, number] | undefined {
    if (name === undefined) return undefined;
    const tensor = this.#constants.get(name);
    if (tensor !== undefined) {
      const values = integerValues(tensor);
      if (values === null || values.length !== 4) return undefined;
      return [values[2] ?? 0, values[3] ?? 0];
    }
    const concat = this.#producers.get(name);
    if (!isOp(concat, 'Concat') || (concat.input ?? []).length !== 4) return undefined;
    const heads = this.#scalar(concat.input?.[2]);
    const width = this.#scalar(concat.input?.[3]);
    return heads === undefined || width === undefined ? undefined : [heads, width];
  }

  /** `Transpose(perm)(Reshape(x → [B, S, H, d]))` read only by the attention: x, H and d. */
  #heads(name: string | undefined, perm: readonly number[]): { source: string; heads: number; width: number; nodes: NodeProto[] } | undefined {
    const transpose = this.#privateProducer(name);
    if (!isOp(transpose, 'Transpose') || !samePerm(transpose, perm)) return undefined;
    const reshape = this.#privateProducer(transpose.input?.[0]);
    if (!isOp(reshape, 'Reshape')) return undefined;
    const tail = this.#shapeTail(reshape.input?.[1]);
    const source = reshape.input?.[0];
    if (tail === undefined || source === undefined || source === '' || tail[0] <= 0 || tail[1] <= 0) return undefined;
    return { source, heads: tail[0], width: tail[1], nodes: [transpose, reshape] };
  }

  /**
   * The padding mask behind the Add: `(1 − Cast(Unsqueeze(Unsqueeze(m, 1), 2)))·c` (or with the
   * Cast first, or one Unsqueeze of axes [1, 2]) over a rank-2 graph input m. Returns m and c.
   */
  #paddingMask(name: string | undefined): { input: string; filter: number } | undefined {
    const mul = this.#producers.get(name ?? '');
    if (!isOp(mul, 'Mul')) return undefined;
    const [left, right] = mul.input ?? [];
    let filter = this.#scalar(right);
    let rest = left;
    if (filter === undefined) {
      filter = this.#scalar(left);
      rest = right;
    }
    const sub = this.#producers.get(rest ?? '');
    if (filter === undefined || !(filter < 0) || !isOp(sub, 'Sub') || this.#scalar(sub.input?.[0]) !== 1) return undefined;
    let current = sub.input?.[1] ?? '';
    const axes: number[] = [];
    let casts = 0;
    for (let hops = 0; hops < 4; hops++) {
      // `#inputRanks` holds graph inputs only.
      if (this.#inputRanks.get(current) === 2) {
        const inserted = [...axes].sort((a, b) => a - b);
        const ok = casts === 1 && inserted.length === 2 && inserted[0] === 1 && inserted[1] === 2;
        return ok ? { input: current, filter } : undefined;
      }
      const node = this.#producers.get(current);
      if (node === undefined || (node.domain ?? '') !== '') return undefined;
      if (node.opType === 'Cast') {
        if (toInt(attributeOf(node, 'to')?.i) !== DataType.FLOAT) return undefined;
        casts++;
      } else if (node.opType === 'Unsqueeze') {
        const found = ints(node, 'axes') ?? integerValues(this.#constants.get(node.input?.[1] ?? '') ?? {});
        if (found === undefined || found === null) return undefined;
        axes.push(...found);
      } else {
        return undefined;
      }
      current = node.input?.[0] ?? '';
    }
    return undefined;
  }

  #softmaxOnLastAxis(node: NodeProto): boolean {
    const axis = attributeOf(node, 'axis');
    if (axis === undefined) return this.#opset >= 13;
    const value = toInt(axis.i);
    return value === -1 || value === 3;
  }

  #intMask(input: string): string {
    const known = this.#intMasks.get(input);
    if (known !== undefined) return known.name;
    const name = freshName(this.#names, `${input}_int32`);
    const cast: NodeProto = { name: `${name}_cast`, opType: 'Cast', domain: '', input: [input], output: [name], attribute: [{ name: 'to', type: INT, i: DataType.INT32 }] };
    this.#intMasks.set(input, { name, cast });
    return name;
  }

  /** Tries one Softmax; on a match records the replacement and the nodes it removes. */
  #fuse(softmax: NodeProto): boolean {
    if (!this.#softmaxOnLastAxis(softmax)) return false;
    // Scores, optionally plus the padding mask.
    let scaled = this.#privateProducer(softmax.input?.[0]);
    const fused: NodeProto[] = [softmax];
    let mask: { input: string; filter: number } | undefined;
    if (isOp(scaled, 'Add')) {
      const add = scaled;
      const [a, b] = add.input ?? [];
      for (const [scores, other] of [[a, b], [b, a]] as const) {
        const candidate = this.#privateProducer(scores);
        const found = this.#paddingMask(other);
        if (candidate !== undefined && found !== undefined) {
          scaled = candidate;
          mask = found;
          break;
        }
      }
      if (mask === undefined) return false;
      fused.push(add);
    }
    // The scale: Div by a constant, Mul by a constant, or none.
    let scale = 1;
    let product = scaled;
    if (isOp(scaled, 'Div') || isOp(scaled, 'Mul')) {
      const [x, y] = scaled.input ?? [];
      const right = this.#scalar(y);
      const left = scaled.opType === 'Mul' ? this.#scalar(x) : undefined;
      const factor = right ?? left;
      if (factor === undefined || factor === 0 || !Number.isFinite(factor)) return false;
      scale = scaled.opType === 'Div' ? 1 / factor : factor;
      product = this.#privateProducer(right !== undefined ? x : y);
      fused.push(scaled);
    }
    if (!isOp(product, 'MatMul')) return false;
    fused.push(product);
    const query = this.#heads(product.input?.[0], [0, 2, 1, 3]);
    const key = this.#heads(product.input?.[1], [0, 2, 3, 1]);
    // The weighted sum and the heads merged back.
    const weighted = this.#onlyReader(softmax.output?.[0]);
    if (!isOp(weighted, 'MatMul') || weighted.input?.[0] !== softmax.output?.[0]) return false;
    const value = this.#heads(weighted.input?.[1], [0, 2, 1, 3]);
    const merge = this.#onlyReader(weighted.output?.[0]);
    if (!isOp(merge, 'Transpose') || !samePerm(merge, [0, 2, 1, 3])) return false;
    const reshape = this.#onlyReader(merge.output?.[0]);
    const [merged] = reshape?.output ?? [];
    if (!isOp(reshape, 'Reshape') || merged === undefined || query === undefined || key === undefined || value === undefined) return false;
    const { heads, width } = query;
    if (key.heads !== heads || key.width !== width || value.heads !== heads || value.width !== width) return false;
    fused.push(...query.nodes, ...key.nodes, ...value.nodes, weighted, merge, reshape);
    if (fused.some((node) => this.#removed.has(node))) return false;

    const inputs = [query.source, key.source, value.source];
    const attributes: AttributeProto[] = [
      { name: 'num_heads', type: INT, i: heads },
      { name: 'scale', type: FLOAT, f: scale },
    ];
    if (mask !== undefined) {
      inputs.push('', this.#intMask(mask.input));
      attributes.push({ name: 'mask_filter_value', type: FLOAT, f: Math.max(mask.filter, -3.4e38) });
    }
    const attention: NodeProto = { name: `${reshape.name ?? merged}_attention`, opType: ATTENTION_OP, domain: MS_DOMAIN, input: inputs, output: [merged], attribute: attributes };
    for (const node of fused) this.#removed.add(node);
    this.#replacements.set(reshape, attention);
    return true;
  }

  run(): void {
    for (const node of this.#graph.node ?? []) {
      if (!isOp(node, 'Softmax')) continue;
      if (this.#fuse(node)) this.report.fused++;
      else this.report.unmatched++;
    }
    if (this.report.fused === 0) return;
    const casts = [...this.#intMasks.values()].map((m) => m.cast);
    const nodes: NodeProto[] = [...casts];
    for (const node of this.#graph.node ?? []) {
      const replacement = this.#replacements.get(node);
      if (replacement !== undefined) nodes.push(replacement);
      else if (!this.#removed.has(node)) nodes.push(node);
    }
    const kept = withoutDeadNodes(nodes, this.#outputs);
    if (this.#danglingReads(kept)) {
      // A Shape (or anything) outside the blocks still reads a removed tensor: keep the graph as it was.
      this.report.unmatched += this.report.fused;
      this.report.fused = 0;
      return;
    }
    this.#graph.node = kept;
  }

  /** Whether a kept node reads a tensor only a removed node produced. */
  #danglingReads(kept: readonly NodeProto[]): boolean {
    const gone = new Set<string>();
    for (const node of this.#removed) for (const name of node.output ?? []) gone.add(name);
    for (const node of kept) for (const name of node.output ?? []) gone.delete(name);
    const read = new Map<string, number>();
    consumedNames({ node: [...kept] }, read);
    return [...gone].some((name) => read.has(name) || this.#outputs.has(name));
  }
}

/**
 * `nodes` without those whose outputs nothing reads (repeatedly: a chain feeding only dead nodes
 * goes too). ONNX ops have no side effects, so a node with no readers computes nothing used.
 */
export function withoutDeadNodes(nodes: NodeProto[], graphOutputs: ReadonlySet<string>): NodeProto[] {
  let current = nodes;
  for (;;) {
    const read = new Map<string, number>();
    consumedNames({ node: current }, read);
    const kept = current.filter((node) => (node.output ?? []).some((name) => read.has(name) || graphOutputs.has(name)));
    if (kept.length === current.length) return kept;
    current = kept;
  }
}

/**
 * Fuses every matching self-attention block of `graph` in place (see the header) and reports how
 * many; `opset` is the model's default-domain opset (Softmax's default axis depends on it).
 */
export function fuseAttention(graph: GraphProto, opset: number): AttentionFusionReport {
  const fuser = new AttentionFuser(graph, opset);
  fuser.run();
  return fuser.report;
}
