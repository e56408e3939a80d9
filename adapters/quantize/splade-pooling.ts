import { DataType, defaultOpset, freshName, int64Tensor, onnx, rawTensor, tensorNames, type ModelProto, type NodeProto, type TensorProto } from './onnx-file.js';

/**
 * SpladePooling inside the graph. A SPLADE model's graph returns masked-LM logits [batch,
 * sequence, vocab] — 30,522 floats a token, 125 MB for a batch of 1,024 tokens — which the
 * family then pooled in JavaScript. Appending the pooling to the graph returns [batch, vocab]
 * term weights instead: relu, the attention mask (padding never counts), max or sum over the
 * sequence, and the activation (log1p, or log1p twice for OpenSearch's sparse models), the same
 * arithmetic as splade.ts's JavaScript pooling. On bench-minilm-l6's encoder with BERT's head
 * (bench/int8-graph.ts --splade-head) the logits' copy out of onnxruntime cost as much as a
 * third of a batch. Graph inputs are untouched, so the same feeds run both graphs.
 */

export const SPLADE_WEIGHTS_OUTPUT = 'splade_weights';

export interface SpladePoolingOptions {
  /** The graph output holding the logits (the catalog's `output`); null: `logits`, else the graph's only output. */
  logits: string | null;
  /** The graph input that marks real tokens. */
  mask: string;
  pooling: 'max' | 'sum';
  activation: 'relu' | 'log1p_relu';
}

export interface SpladePoolingReport {
  /** false: the graph was left as it was, for `reason`. */
  pooled: boolean;
  reason?: string;
  logits?: string;
}

/** Appends the pooling to `model` (in place); see the file comment. */
export function rewriteSpladePooling(model: ModelProto, options: SpladePoolingOptions): SpladePoolingReport {
  const graph = model.graph;
  if (graph === null || graph === undefined) return { pooled: false, reason: 'the model has no graph' };
  const outputs = graph.output ?? [];
  // A configured name that is not there is left to the family's own error, which names the outputs.
  const logits = options.logits !== null ? outputs.find((output) => output.name === options.logits) : (outputs.find((output) => output.name === 'logits') ?? (outputs.length === 1 ? outputs[0] : undefined));
  if (logits === undefined || typeof logits.name !== 'string') return { pooled: false, reason: `no output "${options.logits ?? 'logits'}"` };
  const shape = logits.type?.tensorType?.shape?.dim ?? [];
  // An export that already ends in SpladePooling declares [batch, vocab]: nothing to pool.
  if (shape.length !== 3) return { pooled: false, reason: `output "${logits.name}" has rank ${shape.length}, not [batch, sequence, vocab]`, logits: logits.name };
  if (!(graph.input ?? []).some((input) => input.name === options.mask)) return { pooled: false, reason: `no input "${options.mask}"`, logits: logits.name };

  const opset = defaultOpset(model);
  const names = tensorNames(graph);
  const fresh = (base: string): string => freshName(names, `/splade_pooling/${base}`);
  const nodes: NodeProto[] = [];
  const tensors: TensorProto[] = [];
  const node = (opType: string, inputs: string[], base: string, attribute: NodeProto['attribute'] = []): string => {
    const output = fresh(base);
    nodes.push({ opType, name: output, input: inputs, output: [output], attribute });
    return output;
  };
  const constant = (base: string, make: (name: string) => TensorProto): string => {
    const name = fresh(base);
    tensors.push(make(name));
    return name;
  };
  /** The axes input of the ops that take one (from opset 13; ReduceMax from 18). */
  const axes = (base: string, values: number[]): string => constant(base, (name) => int64Tensor(name, [values.length], values));
  const ints = (name: string, values: number[]): NonNullable<NodeProto['attribute']>[number] => ({ name, type: onnx.AttributeProto.AttributeType.INTS, ints: values });
  const int = (name: string, value: number): NonNullable<NodeProto['attribute']>[number] => ({ name, type: onnx.AttributeProto.AttributeType.INT, i: value });
  const one = constant('one', (name) => rawTensor(name, DataType.FLOAT, [], new Float32Array([1])));
  // log1p(x) as Log(1 + x): within 1e-7 of Math.log1p for the weights SPLADE gives.
  const log1p = (input: string, base: string): string => node('Log', [node('Add', [input, one], `${base}_add`)], base);
  const activate = (input: string): string => {
    const once = log1p(input, 'log1p');
    return options.activation === 'relu' ? once : log1p(once, 'log1p_twice');
  };

  const maskFloat = node('Cast', [options.mask], 'mask_float', [int('to', DataType.FLOAT)]);
  // Unsqueeze and ReduceSum take their axes as an input from opset 13, ReduceMax from opset 18.
  const maskColumn = opset >= 13 ? node('Unsqueeze', [maskFloat, axes('last_axis', [-1])], 'mask') : node('Unsqueeze', [maskFloat], 'mask', [ints('axes', [-1])]);
  let weights: string;
  if (options.pooling === 'max') {
    // Padded positions become 0, which can only win the maximum where every real logit is
    // negative, and relu makes those 0 anyway: relu(max(masked)) = max over real positions of
    // relu. So the relu and the monotone activation run on [batch, vocab], after the one pass
    // over [batch, sequence, vocab] that the mask and the maximum need.
    const masked = node('Mul', [logits.name, maskColumn], 'masked');
    const reduced = opset >= 18 ? node('ReduceMax', [masked, axes('sequence_axis', [1])], 'max', [int('keepdims', 0)]) : node('ReduceMax', [masked], 'max', [ints('axes', [1]), int('keepdims', 0)]);
    weights = activate(node('Relu', [reduced], 'relu'));
  } else {
    const relu = node('Relu', [logits.name], 'relu');
    const masked = node('Mul', [activate(relu), maskColumn], 'masked');
    weights = opset >= 13 ? node('ReduceSum', [masked, axes('sequence_axis', [1])], 'sum', [int('keepdims', 0)]) : node('ReduceSum', [masked], 'sum', [ints('axes', [1]), int('keepdims', 0)]);
  }
  nodes.push({ opType: 'Identity', name: '/splade_pooling/output', input: [weights], output: [SPLADE_WEIGHTS_OUTPUT] });

  graph.node = [...(graph.node ?? []), ...nodes];
  graph.initializer = [...(graph.initializer ?? []), ...tensors];
  const [batch, , vocab] = shape;
  graph.output = [{ name: SPLADE_WEIGHTS_OUTPUT, type: { tensorType: { elemType: DataType.FLOAT, shape: { dim: [batch ?? { dimParam: 'batch' }, vocab ?? { dimParam: 'vocab' }] } } } }];
  return { pooled: true, logits: logits.name };
}
