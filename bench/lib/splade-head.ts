import { writeFile } from 'node:fs/promises';
import { DataType, dimsOf, onnx, rawTensor, readOnnx, serializeOnnx, type NodeProto, type TensorProto } from '../../adapters/quantize/onnx-file.js';
import { rewriteSpladePooling } from '../../adapters/quantize/splade-pooling.js';
import { gaussian, seededRandom } from './vector-sets.js';

/**
 * A SPLADE graph at a real encoder's size, for speed measurements only (random head weights):
 * the encoder of `source` (its `last_hidden_state`) followed by BertForMaskedLM's head — dense
 * H×H + GELU (erf) + LayerNorm, then the vocabulary projection H×V + bias — giving `logits`
 * [batch, sequence, V], the output Shoal's SPLADE family pools. The kit's SPLADE model is 32 wide
 * with 2 layers, so its timings say nothing about a real one; this is bench-minilm-l6's encoder
 * (all-MiniLM-L6-v2's geometry) with BERT's 30,522-term head, the shape of the small SPLADE
 * models built on MiniLM. The head is written with the operators the encoder's own export uses
 * (opset 14: ReduceMean/Sub/Pow/Sqrt LayerNorm, Erf GELU), which onnxruntime fuses the same way.
 */

/** Deterministic N(0, std²) values (the benches' seeded generator), so every run builds the same graph. */
function normals(count: number, std: number, seed: number): Float32Array {
  const next = gaussian(seededRandom(seed));
  return Float32Array.from({ length: count }, () => next() * std);
}

/** `pool`: SpladePooling (max, log1p) appended as Shoal appends it at load (splade-pooling.ts). */
export async function writeSpladeHeadGraph(source: string, target: string, options: { pool?: boolean; vocab?: number } = {}): Promise<void> {
  const vocab = options.vocab ?? 30_522;
  const { model } = await readOnnx(source);
  const graph = model.graph;
  const hiddenName = graph?.output?.[0]?.name;
  if (graph === null || graph === undefined || hiddenName === undefined || hiddenName === null) throw new Error(`${source}: no graph output to put a head on`);
  // The hidden size: the last LayerNorm weight of the encoder is [H].
  const layerNorm = (graph.initializer ?? []).filter((tensor) => /LayerNorm\.weight$/.test(tensor.name ?? '')).at(-1);
  const hidden = layerNorm === undefined ? 0 : (dimsOf(layerNorm)[0] ?? 0);
  if (hidden === 0) throw new Error(`${source}: no LayerNorm weight to read the hidden size from`);

  const tensors: TensorProto[] = [];
  const tensor = (name: string, dims: number[], values: Float32Array): string => {
    tensors.push(rawTensor(name, DataType.FLOAT, dims, values));
    return name;
  };
  const scalar = (name: string, value: number): string => tensor(name, [], new Float32Array([value]));
  const nodes: NodeProto[] = [];
  const node = (opType: string, inputs: string[], output: string, attribute: NodeProto['attribute'] = []): string => {
    nodes.push({ opType, name: `/head/${output}`, input: inputs, output: [output], attribute });
    return output;
  };

  const dense = node('Add', [node('MatMul', [hiddenName, tensor('head.dense.weight', [hidden, hidden], normals(hidden * hidden, 0.02, 1))], 'dense_mm'), tensor('head.dense.bias', [hidden], new Float32Array(hidden))], 'dense');
  // GELU(x) = 0.5 · x · (1 + erf(x / √2))
  const erf = node('Erf', [node('Div', [dense, scalar('head.sqrt2', Math.SQRT2)], 'gelu_div')], 'gelu_erf');
  const gelu = node('Mul', [node('Mul', [dense, node('Add', [erf, scalar('head.one', 1)], 'gelu_add')], 'gelu_mul'), scalar('head.half', 0.5)], 'gelu');
  // LayerNorm over the last axis, eps 1e-12, as the encoder's export writes it.
  const lastAxis = [{ name: 'axes', type: onnx.AttributeProto.AttributeType.INTS, ints: [-1] }];
  const mean = node('ReduceMean', [gelu], 'ln_mean', lastAxis);
  const centered = node('Sub', [gelu, mean], 'ln_sub');
  const variance = node('ReduceMean', [node('Pow', [centered, scalar('head.two', 2)], 'ln_pow')], 'ln_var', lastAxis);
  const normed = node('Div', [centered, node('Sqrt', [node('Add', [variance, scalar('head.eps', 1e-12)], 'ln_add')], 'ln_sqrt')], 'ln_div');
  const ones = new Float32Array(hidden).fill(1);
  const transformed = node('Add', [node('Mul', [normed, tensor('head.ln.weight', [hidden], ones)], 'ln_mul'), tensor('head.ln.bias', [hidden], new Float32Array(hidden))], 'ln');
  node('Add', [node('MatMul', [transformed, tensor('head.decoder.weight', [hidden, vocab], normals(hidden * vocab, 0.02, 2))], 'decoder_mm'), tensor('head.decoder.bias', [vocab], new Float32Array(vocab))], 'logits');

  graph.initializer = [...(graph.initializer ?? []), ...tensors];
  graph.node = [...(graph.node ?? []), ...nodes];
  const dim = (param: string): { dimParam: string } => ({ dimParam: param });
  graph.output = [
    {
      name: 'logits',
      type: { tensorType: { elemType: DataType.FLOAT, shape: { dim: [dim('batch_size'), dim('sequence_length'), { dimValue: vocab }] } } },
    },
  ];
  if (options.pool === true && !rewriteSpladePooling(model, { logits: 'logits', mask: 'attention_mask', pooling: 'max', activation: 'relu' }).pooled) throw new Error('the head graph could not be pooled');
  const { graph: bytes, external } = serializeOnnx(model, 'model.onnx_data');
  if (external !== null) throw new Error('the head graph is over the protobuf limit');
  await writeFile(target, bytes);
}
