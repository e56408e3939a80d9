import { open, readFile } from 'node:fs/promises';
import { dirname, isAbsolute, join, normalize, sep } from 'node:path';
import onnxProto from 'onnx-proto';
import { ErrorCode, ShoalError } from '../protocol/errors.js';

/**
 * Reading and writing ONNX models with the onnx-proto protobuf definitions (ONNX 1.10, IR 8).
 * Tensors kept in external-data files are read into the model on load, so the rewrite sees one
 * self-contained graph; on write, a model whose tensors exceed protobuf's 2 GB limit puts its
 * large tensors back into one external-data file next to it.
 *
 * Fields added to ONNX after 1.10 are unknown to these definitions and are dropped on rewrite;
 * graphs exported today for the supported families do not use them.
 */

export const { onnx } = onnxProto;
export type ModelProto = onnxProto.onnx.IModelProto;
export type GraphProto = onnxProto.onnx.IGraphProto;
export type NodeProto = onnxProto.onnx.INodeProto;
export type TensorProto = onnxProto.onnx.ITensorProto;
export type AttributeProto = onnxProto.onnx.IAttributeProto;

export const DataType = onnx.TensorProto.DataType;
const EXTERNAL = onnx.TensorProto.DataLocation.EXTERNAL;

/** Protobuf's hard limit on one message; stay well below it. */
export const SELF_CONTAINED_LIMIT = 2 ** 31 - 64 * 1024 * 1024;
/** Tensors at least this large go to the external-data file when a model must be split. */
const EXTERNAL_MIN_BYTES = 1024;
/** Offsets in the external-data file are aligned so the runtime can map tensors directly. */
const EXTERNAL_ALIGN = 4096;

/** int64 fields decode as Long objects when the `long` package is present. */
export function toInt(value: number | { toNumber(): number } | null | undefined, fallback = 0): number {
  if (value === null || value === undefined) return fallback;
  return typeof value === 'number' ? value : value.toNumber();
}

export function dimsOf(tensor: TensorProto): number[] {
  return (tensor.dims ?? []).map((d) => toInt(d));
}

export function elementCount(tensor: TensorProto): number {
  return dimsOf(tensor).reduce((a, b) => a * b, 1);
}

/** The values of a float32 tensor (raw or repeated storage), or null for any other type. */
export function floatValues(tensor: TensorProto): Float32Array | null {
  if (tensor.dataType !== DataType.FLOAT) return null;
  const count = elementCount(tensor);
  const raw = tensor.rawData;
  if (raw !== null && raw !== undefined && raw.length > 0) {
    if (raw.length !== count * 4) return null;
    // Copy: a decoded protobuf `bytes` field is a view at any byte offset, not 4-byte aligned
    // (and Buffer#slice would share memory rather than copy).
    return new Float32Array(new Uint8Array(raw).buffer);
  }
  const repeated = tensor.floatData ?? [];
  return repeated.length === count ? Float32Array.from(repeated) : null;
}

export function bytesOf(values: Float32Array | Int8Array | Uint8Array): Uint8Array {
  return new Uint8Array(values.buffer, values.byteOffset, values.byteLength);
}

/** A tensor holding `values` as raw bytes (how every rewrite stores the tensors it adds). */
export function rawTensor(name: string, dataType: number, dims: number[], values: Float32Array | Int8Array | Uint8Array): TensorProto {
  return { name, dataType, dims, rawData: bytesOf(values) };
}

/**
 * Constant tensors of a graph by the name its nodes read them under: the initializers and, with
 * `constantNodes`, the `value` of each Constant node under its output's name (exports without
 * constant folding keep small constants as nodes).
 */
export function constantTensors(graph: GraphProto, options: { constantNodes: boolean }): Map<string, TensorProto> {
  const found = new Map<string, TensorProto>();
  for (const tensor of graph.initializer ?? []) if (tensor.name) found.set(tensor.name, tensor);
  if (!options.constantNodes) return found;
  for (const node of graph.node ?? []) {
    const value = node.attribute?.find((a) => a.name === 'value')?.t;
    const [output] = node.output ?? [];
    if (node.opType === 'Constant' && value !== null && value !== undefined && output !== undefined) found.set(output, value);
  }
  return found;
}

/** The version of the default (ai.onnx) opset a model imports; `fallback` when it imports none. */
export function defaultOpset(model: ModelProto, fallback = 0): number {
  const entry = (model.opsetImport ?? []).find((o) => (o.domain ?? '') === '');
  return toInt(entry?.version, fallback);
}

/** An int64 tensor holding `values` as raw bytes. */
export function int64Tensor(name: string, dims: number[], values: readonly number[]): TensorProto {
  const data = BigInt64Array.from(values, (v) => BigInt(v));
  return { name, dataType: DataType.INT64, dims, rawData: new Uint8Array(data.buffer) };
}

/** Counts, into `into`, every tensor name a graph's nodes read, nested subgraphs included. */
export function consumedNames(graph: GraphProto, into: Map<string, number>): void {
  for (const node of graph.node ?? []) {
    for (const name of node.input ?? []) if (name !== '') into.set(name, (into.get(name) ?? 0) + 1);
    for (const attribute of node.attribute ?? []) {
      if (attribute.g !== null && attribute.g !== undefined) consumedNames(attribute.g, into);
      for (const sub of attribute.graphs ?? []) consumedNames(sub, into);
    }
  }
}

export function attributeOf(node: NodeProto, name: string): AttributeProto | undefined {
  return node.attribute?.find((a) => a.name === name);
}

/** Every tensor name a graph uses (initializers, inputs, outputs, value infos, node outputs). */
export function tensorNames(graph: GraphProto): Set<string> {
  const names = new Set<string>();
  for (const tensor of graph.initializer ?? []) names.add(tensor.name ?? '');
  for (const info of [...(graph.input ?? []), ...(graph.output ?? []), ...(graph.valueInfo ?? [])]) names.add(info.name ?? '');
  for (const node of graph.node ?? []) for (const name of node.output ?? []) names.add(name);
  return names;
}

/** A name not in `names` yet, derived from `base` (`base`, `base_1`, ...); it is added to `names`. */
export function freshName(names: Set<string>, base: string): string {
  let name = base;
  for (let n = 1; names.has(name); n++) name = `${base}_${n}`;
  names.add(name);
  return name;
}

function externalField(tensor: TensorProto, key: string): string | undefined {
  return tensor.externalData?.find((entry) => entry.key === key)?.value ?? undefined;
}

/** Every tensor held by a graph (initializers), its subgraphs' included. */
function* graphTensors(graph: GraphProto | null | undefined): Generator<TensorProto> {
  if (graph === null || graph === undefined) return;
  yield* graph.initializer ?? [];
  for (const node of graph.node ?? []) {
    for (const attribute of node.attribute ?? []) {
      if (attribute.t !== null && attribute.t !== undefined) yield attribute.t;
      yield* graphTensors(attribute.g);
      for (const sub of attribute.graphs ?? []) yield* graphTensors(sub);
    }
  }
}

/** An external-data location must stay inside the model's folder (as onnxruntime also requires). */
function externalPath(modelDir: string, location: string, modelPath: string): string {
  const clean = normalize(location);
  if (isAbsolute(clean) || clean === '..' || clean.startsWith(`..${sep}`)) {
    throw new ShoalError(ErrorCode.MODEL_LOAD_FAILED, `${modelPath}: external data location "${location}" points outside the model folder`);
  }
  return join(modelDir, clean);
}

export interface LoadedOnnx {
  model: ModelProto;
  /** Size of the .onnx file itself. */
  bytes: number;
  /** External-data files the model read from (relative locations, sorted). */
  externalFiles: string[];
}

export function decodeOnnx(bytes: Uint8Array, what: string): ModelProto {
  try {
    return onnx.ModelProto.decode(bytes);
  } catch (error) {
    throw new ShoalError(ErrorCode.MODEL_LOAD_FAILED, `${what} is not a readable ONNX model: ${String(error)}`, { cause: error });
  }
}

/** Reads a model and inlines its external data, so every tensor carries its bytes. */
export async function readOnnx(path: string): Promise<LoadedOnnx> {
  let bytes: Buffer;
  try {
    bytes = await readFile(path);
  } catch (error) {
    throw new ShoalError(ErrorCode.MODEL_LOAD_FAILED, `cannot read ONNX file ${path}: ${String(error)}`, { cause: error });
  }
  const model = decodeOnnx(bytes, path);
  const external = new Set<string>();
  for (const tensor of graphTensors(model.graph)) {
    if (tensor.dataLocation !== EXTERNAL) continue;
    const location = externalField(tensor, 'location');
    if (location === undefined) throw new ShoalError(ErrorCode.MODEL_LOAD_FAILED, `${path}: tensor ${tensor.name ?? '?'} has external data without a location`);
    external.add(location);
    const offset = Number(externalField(tensor, 'offset') ?? '0');
    const lengthField = externalField(tensor, 'length');
    const file = externalPath(dirname(path), location, path);
    const handle = await open(file, 'r').catch((error: unknown) => {
      throw new ShoalError(ErrorCode.MODEL_LOAD_FAILED, `${path}: cannot open external data file ${location}: ${String(error)}`, { cause: error });
    });
    try {
      const length = lengthField === undefined ? (await handle.stat()).size - offset : Number(lengthField);
      const data = Buffer.alloc(length);
      const { bytesRead } = await handle.read(data, 0, length, offset);
      if (bytesRead !== length) {
        throw new ShoalError(ErrorCode.MODEL_LOAD_FAILED, `${path}: external data file ${location} ends before tensor ${tensor.name ?? '?'} (${bytesRead} of ${length} bytes)`);
      }
      tensor.rawData = data;
    } finally {
      await handle.close();
    }
    // Removed rather than reset, so the tensor encodes exactly like one that was always inline.
    delete tensor.externalData;
    delete tensor.dataLocation;
  }
  return { model, bytes: bytes.length, externalFiles: [...external].sort() };
}

export interface SerializedOnnx {
  graph: Uint8Array;
  /** Chunks of the external-data file (in order), or null when the model is self-contained. */
  external: Uint8Array[] | null;
}

function tensorBytes(graph: GraphProto | null | undefined): number {
  let total = 0;
  for (const tensor of graphTensors(graph)) total += tensor.rawData?.length ?? 0;
  return total;
}

/**
 * Encodes a model. Under the protobuf limit it is one self-contained buffer; above it, tensors of
 * EXTERNAL_MIN_BYTES or more move to an external-data file named `externalName` (relative to the
 * .onnx file), aligned to EXTERNAL_ALIGN. Mutates the tensors it moves out.
 */
export function serializeOnnx(model: ModelProto, externalName: string, limit = SELF_CONTAINED_LIMIT): SerializedOnnx {
  if (tensorBytes(model.graph) < limit) return { graph: onnx.ModelProto.encode(model).finish(), external: null };
  const chunks: Uint8Array[] = [];
  let offset = 0;
  for (const tensor of graphTensors(model.graph)) {
    const raw = tensor.rawData;
    if (raw === null || raw === undefined || raw.length < EXTERNAL_MIN_BYTES) continue;
    const padding = (EXTERNAL_ALIGN - (offset % EXTERNAL_ALIGN)) % EXTERNAL_ALIGN;
    if (padding > 0) chunks.push(new Uint8Array(padding));
    offset += padding;
    chunks.push(raw);
    tensor.externalData = [
      { key: 'location', value: externalName },
      { key: 'offset', value: String(offset) },
      { key: 'length', value: String(raw.length) },
    ];
    tensor.dataLocation = EXTERNAL;
    tensor.rawData = new Uint8Array(0);
    offset += raw.length;
  }
  return { graph: onnx.ModelProto.encode(model).finish(), external: chunks };
}

/** The values of an int64 or int32 tensor (raw or repeated storage), or null for any other type. */
export function integerValues(tensor: TensorProto): number[] | null {
  const count = elementCount(tensor);
  const raw = tensor.rawData;
  const hasRaw = raw !== null && raw !== undefined && raw.length > 0;
  if (tensor.dataType === DataType.INT64) {
    if (hasRaw) {
      if (raw.length !== count * 8) return null;
      const view = new DataView(raw.buffer, raw.byteOffset, raw.byteLength);
      return Array.from({ length: count }, (_, i) => Number(view.getBigInt64(i * 8, true)));
    }
    const repeated = tensor.int64Data ?? [];
    return repeated.length === count ? repeated.map((v) => toInt(v)) : null;
  }
  if (tensor.dataType === DataType.INT32) {
    if (hasRaw) {
      if (raw.length !== count * 4) return null;
      const view = new DataView(raw.buffer, raw.byteOffset, raw.byteLength);
      return Array.from({ length: count }, (_, i) => view.getInt32(i * 4, true));
    }
    const repeated = tensor.int32Data ?? [];
    return repeated.length === count ? [...repeated] : null;
  }
  return null;
}
