import { ErrorCode, ShoalError } from '../protocol/errors.js';
import {
  constantTensors,
  DataType,
  defaultOpset,
  dimsOf,
  floatValues,
  freshName,
  int64Tensor,
  rawTensor,
  tensorNames,
  type GraphProto,
  type ModelProto,
  type NodeProto,
  type TensorProto,
} from './onnx-file.js';

/**
 * The rewrite a causal-LM reranker needs: its graph returns logits [batch, sequence, vocab]
 * (151,936 columns for Qwen3: 32 pairs of 512 tokens are about 10 GB of floats) when the score
 * reads two numbers per pair. The rewritten graph gathers the last real token's hidden state
 * (ArgMax of the attention mask's running sum: the last 1, whatever the padding side) before the
 * LM head and returns only the chosen columns, `[batch, columns]`, as its one output; the KV
 * `present.*` outputs go, and every node and weight nothing reads any more is pruned.
 *
 * When the head is a MatMul with a constant float weight [hidden, vocab] (plain exports), the
 * weight itself is cut to the chosen columns; any other head (MatMulNBits, an int8 chain, a
 * transposed tied embedding) runs on the gathered row and the columns are gathered after it.
 * Graph inputs are untouched, so the same feeds run both graphs.
 */

export const LAST_TOKEN_OUTPUT = 'last_token_logits';

/** Ops that can be the LM head: the product that maps hidden states to the vocabulary. */
const HEAD_OPS = new Set(['MatMul', 'Gemm', 'MatMulNBits', 'MatMulInteger', 'DynamicQuantizeMatMul', 'MatMulIntegerToFloat', 'QLinearMatMul']);
/** How far back from the logits output the head is looked for (bias adds, casts, scale muls). */
const MAX_HEAD_DEPTH = 6;

export interface LastTokenOptions {
  /** The graph output holding [batch, sequence, vocab] logits. */
  logits: string;
  /** Vocabulary columns to keep, in output order (e.g. [id("no"), id("yes")]). */
  columns: readonly number[];
  /** The graph input whose running sum finds the last real token. */
  mask?: string;
}

export interface LastTokenReport {
  /** `sliced`: the head's weight was cut to the columns; `gathered`: columns gathered after the head. */
  head: 'sliced' | 'gathered';
  headOp: string;
  nodesBefore: number;
  nodesAfter: number;
  initializersDropped: number;
}

function refuse(message: string): never {
  throw new ShoalError(ErrorCode.MODEL_LOAD_FAILED, `last-token rewrite: ${message}`);
}

/** Names a node reads, those read inside its subgraphs (If/Loop bodies) included. */
function readsOf(node: NodeProto): string[] {
  const names = (node.input ?? []).filter((name) => name !== '');
  const visit = (graph: GraphProto): void => {
    for (const inner of graph.node ?? []) names.push(...readsOf(inner));
  };
  for (const attribute of node.attribute ?? []) {
    if (attribute.g !== null && attribute.g !== undefined) visit(attribute.g);
    for (const sub of attribute.graphs ?? []) visit(sub);
  }
  return names;
}

/** The head node nearest the logits output, and the nodes between it and the output. */
function findHead(producers: Map<string, NodeProto>, logits: string): { head: NodeProto; path: Set<NodeProto> } {
  let frontier: { name: string; path: NodeProto[] }[] = [{ name: logits, path: [] }];
  for (let depth = 0; depth < MAX_HEAD_DEPTH && frontier.length > 0; depth++) {
    const next: { name: string; path: NodeProto[] }[] = [];
    for (const { name, path } of frontier) {
      const node = producers.get(name);
      if (node === undefined) continue;
      if (HEAD_OPS.has(node.opType ?? '')) return { head: node, path: new Set([...path, node]) };
      for (const input of node.input ?? []) if (input !== '') next.push({ name: input, path: [...path, node] });
    }
    frontier = next;
  }
  return refuse(`no MatMul/Gemm/MatMulNBits within ${MAX_HEAD_DEPTH} nodes of output ${logits}`);
}

/** Keeps the nodes the outputs need and the initializers those nodes read; returns how many initializers went. */
function prune(graph: GraphProto): number {
  const producers = new Map<string, NodeProto>();
  for (const node of graph.node ?? []) for (const name of node.output ?? []) producers.set(name, node);
  const needed = new Set<NodeProto>();
  const read = new Set<string>();
  const queue = (graph.output ?? []).map((o) => o.name ?? '');
  for (let name = queue.pop(); name !== undefined; name = queue.pop()) {
    if (read.has(name)) continue;
    read.add(name);
    const node = producers.get(name);
    if (node === undefined || needed.has(node)) continue;
    needed.add(node);
    queue.push(...readsOf(node));
  }
  graph.node = (graph.node ?? []).filter((node) => needed.has(node));
  const before = graph.initializer?.length ?? 0;
  graph.initializer = (graph.initializer ?? []).filter((tensor) => read.has(tensor.name ?? ''));
  graph.valueInfo = (graph.valueInfo ?? []).filter((info) => read.has(info.name ?? ''));
  return before - graph.initializer.length;
}

/** The head's [hidden, vocab] float weight when it is a plain constant, else null. */
function constantWeight(head: NodeProto, initializers: Map<string, TensorProto>): { values: Float32Array; rows: number; cols: number } | null {
  if (head.opType !== 'MatMul' || (head.domain ?? '') !== '') return null;
  const tensor = initializers.get(head.input?.[1] ?? '');
  if (tensor === undefined || tensor.dataType !== DataType.FLOAT) return null;
  const dims = dimsOf(tensor);
  if (dims.length !== 2) return null;
  const values = floatValues(tensor);
  const [rows = 0, cols = 0] = dims;
  return values === null ? null : { values, rows, cols };
}

/** Rewrites `model` in place (see the file comment). */
export function rewriteLastTokenLogits(model: ModelProto, options: LastTokenOptions): LastTokenReport {
  const graph = model.graph;
  if (graph === null || graph === undefined) return refuse('the model has no graph');
  if (defaultOpset(model) < 12) refuse(`opset ${defaultOpset(model)} has no GatherND batch_dims (needs 12 or later)`);
  const mask = options.mask ?? 'attention_mask';
  if (!(graph.input ?? []).some((input) => input.name === mask)) refuse(`the graph has no ${mask} input`);
  if (!(graph.output ?? []).some((output) => output.name === options.logits)) refuse(`the graph has no output ${options.logits}`);
  if (options.columns.length === 0) refuse('no columns to keep');
  const nodesBefore = graph.node?.length ?? 0;

  const producers = new Map<string, NodeProto>();
  for (const node of graph.node ?? []) for (const name of node.output ?? []) producers.set(name, node);
  const { head, path } = findHead(producers, options.logits);
  // The hidden state enters the head region here; an int8 head quantizes it first, and the
  // gather goes before that quantization so it sees one row, not the whole sequence.
  let hidden = head.input?.[0] ?? refuse('the head has no input');
  let entry: NodeProto = head;
  const quantizer = producers.get(hidden);
  if (quantizer !== undefined && quantizer.opType === 'DynamicQuantizeLinear') {
    hidden = quantizer.input?.[0] ?? hidden;
    entry = quantizer;
    path.add(quantizer);
  }

  const names = tensorNames(graph);
  const fresh = (base: string): string => freshName(names, `shoal_last_token/${base}`);
  const initializers = constantTensors(graph, { constantNodes: false });
  const added: TensorProto[] = [];
  const nodes: NodeProto[] = [];
  const maskFloat = fresh('mask_float');
  const running = fresh('mask_running_sum');
  const lastIndex = fresh('last_index');
  const hiddenLast = fresh('hidden_last');
  const axis = int64Tensor(fresh('axis_1'), [], [1]);
  added.push(axis);
  nodes.push(
    { opType: 'Cast', input: [mask], output: [maskFloat], name: fresh('Cast'), attribute: [{ name: 'to', type: 2, i: DataType.FLOAT }] },
    { opType: 'CumSum', input: [maskFloat, axis.name ?? ''], output: [running], name: fresh('CumSum') },
    // The first column where the running sum peaks is the last real token (left or right padding).
    { opType: 'ArgMax', input: [running], output: [lastIndex], name: fresh('ArgMax'), attribute: [{ name: 'axis', type: 2, i: 1 }, { name: 'keepdims', type: 2, i: 1 }] },
    { opType: 'GatherND', input: [hidden, lastIndex], output: [hiddenLast], name: fresh('GatherND'), attribute: [{ name: 'batch_dims', type: 2, i: 1 }] },
  );
  entry.input = (entry.input ?? []).map((name) => (name === hidden ? hiddenLast : name));

  if (names.has(LAST_TOKEN_OUTPUT)) refuse(`the graph already has a tensor named ${LAST_TOKEN_OUTPUT}`);
  const result = LAST_TOKEN_OUTPUT;
  names.add(result);
  const weight = path.size === 1 ? constantWeight(head, initializers) : null;
  let mode: LastTokenReport['head'];
  if (weight !== null) {
    for (const column of options.columns) if (column < 0 || column >= weight.cols) refuse(`column ${column} is outside the vocabulary of ${weight.cols}`);
    const sliced = new Float32Array(weight.rows * options.columns.length);
    for (let r = 0; r < weight.rows; r++) {
      options.columns.forEach((column, c) => {
        sliced[r * options.columns.length + c] = weight.values[r * weight.cols + column] ?? 0;
      });
    }
    const slicedWeight = rawTensor(fresh('head_columns'), DataType.FLOAT, [weight.rows, options.columns.length], sliced);
    added.push(slicedWeight);
    head.input = [hiddenLast, slicedWeight.name ?? ''];
    head.output = [result];
    mode = 'sliced';
  } else {
    const columns = int64Tensor(fresh('columns'), [options.columns.length], options.columns);
    added.push(columns);
    const gathered = fresh('gathered');
    nodes.push(
      { opType: 'Gather', input: [options.logits, columns.name ?? ''], output: [gathered], name: fresh('Gather'), attribute: [{ name: 'axis', type: 2, i: -1 }] },
      // A float16 export's logits leave as float32, the type the output declares (a no-op for float32).
      { opType: 'Cast', input: [gathered], output: [result], name: fresh('CastOut'), attribute: [{ name: 'to', type: 2, i: DataType.FLOAT }] },
    );
    mode = 'gathered';
  }
  graph.node = [...(graph.node ?? []), ...nodes];
  graph.initializer = [...(graph.initializer ?? []), ...added];
  graph.output = [
    {
      name: result,
      type: { tensorType: { elemType: DataType.FLOAT, shape: { dim: [{ dimParam: 'batch_size' }, { dimValue: options.columns.length }] } } },
    },
  ];
  const initializersDropped = prune(graph);
  return { head: mode, headOp: head.opType ?? '?', nodesBefore, nodesAfter: graph.node?.length ?? 0, initializersDropped };
}
