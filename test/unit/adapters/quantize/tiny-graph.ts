import onnxProto from 'onnx-proto';

/**
 * A hand-built graph with every case the quantizer distinguishes, small enough to check by hand:
 *
 *   input_ids ─Gather(embedding [10, 4])─ x ─MatMul(W1 [4, 3])─ h ─Add(b1 [3])─ hidden (output)
 *   hidden ─Reshape([-1, 3])─ flat ─Gemm(W2 [2, 3], c2 [2], transB=1, alpha=2)─ logits (output)
 *
 * W1 and W2 avoid exact .5 ties after scaling, so their int8 images are unambiguous (see the test).
 * `externalWeights` stores W1 in `model.onnx_data` the way large exports do.
 */

const { onnx } = onnxProto;
const FLOAT = onnx.TensorProto.DataType.FLOAT;
const INT64 = onnx.TensorProto.DataType.INT64;

export const W1 = [
  [1, 2, 0.3],
  [-1, 0.5, -3],
  [0.25, -2, 1],
  [0, 0.9, 0],
];
export const W2 = [
  [0.6, -1, 0.25],
  [2, 0, -0.5],
];
export const B1 = [0.5, -0.25, 0.125];
export const C2 = [0.1, -0.2];
export const VOCAB = 10;
const EMBEDDING = Array.from({ length: VOCAB * 4 }, (_, i) => Math.sin(i * 0.7) * 0.8);

function floats(name: string, dims: number[], values: readonly number[]): onnxProto.onnx.ITensorProto {
  return { name, dims, dataType: FLOAT, rawData: new Uint8Array(new Float32Array(values).buffer) };
}

export interface TinyGraph {
  onnx: Uint8Array;
  /** The external-data file's bytes when `externalWeights` was set. */
  external: Uint8Array | null;
}

export function tinyGraph(options: { externalWeights?: boolean } = {}): TinyGraph {
  const w1 = floats('W1', [4, 3], W1.flat());
  let external: Uint8Array | null = null;
  if (options.externalWeights === true) {
    external = w1.rawData ?? null;
    w1.rawData = new Uint8Array(0);
    w1.dataLocation = onnx.TensorProto.DataLocation.EXTERNAL;
    w1.externalData = [
      { key: 'location', value: 'model.onnx_data' },
      { key: 'offset', value: '0' },
      { key: 'length', value: String(external?.length ?? 0) },
    ];
  }
  const model = onnx.ModelProto.create({
    irVersion: 8,
    producerName: 'shoal-quantize-test',
    opsetImport: [{ domain: '', version: 14 }],
    graph: {
      name: 'tiny',
      node: [
        { name: 'embed', opType: 'Gather', input: ['embedding', 'input_ids'], output: ['x'] },
        { name: 'linear1', opType: 'MatMul', input: ['x', 'W1'], output: ['h'] },
        { name: 'bias1', opType: 'Add', input: ['h', 'b1'], output: ['hidden'] },
        { name: 'flatten', opType: 'Reshape', input: ['hidden', 'shape2d'], output: ['flat'] },
        {
          name: 'head',
          opType: 'Gemm',
          input: ['flat', 'W2', 'c2'],
          output: ['logits'],
          attribute: [
            { name: 'transB', type: onnx.AttributeProto.AttributeType.INT, i: 1 },
            { name: 'alpha', type: onnx.AttributeProto.AttributeType.FLOAT, f: 2 },
          ],
        },
      ],
      initializer: [
        floats('embedding', [VOCAB, 4], EMBEDDING),
        w1,
        floats('b1', [3], B1),
        { name: 'shape2d', dims: [2], dataType: INT64, rawData: new Uint8Array(new BigInt64Array([-1n, 3n]).buffer) },
        floats('W2', [2, 3], W2.flat()),
        floats('c2', [2], C2),
      ],
      input: [
        { name: 'input_ids', type: { tensorType: { elemType: INT64, shape: { dim: [{ dimParam: 'batch' }, { dimParam: 'sequence' }] } } } },
      ],
      output: [
        { name: 'hidden', type: { tensorType: { elemType: FLOAT, shape: { dim: [{ dimParam: 'batch' }, { dimParam: 'sequence' }, { dimValue: 3 }] } } } },
        { name: 'logits', type: { tensorType: { elemType: FLOAT, shape: { dim: [{ dimParam: 'rows' }, { dimValue: 2 }] } } } },
      ],
    },
  });
  return { onnx: onnx.ModelProto.encode(model).finish(), external };
}
