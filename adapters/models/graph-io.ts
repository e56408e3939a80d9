import { open, type FileHandle } from 'node:fs/promises';
import onnxProto from 'onnx-proto';
import { ErrorCode, ShoalError } from '../protocol/errors.js';

/**
 * The declared inputs and outputs of an ONNX graph, read without loading it: detection runs in a
 * prep thread and must not pull a 300 MB graph into memory (nor create a session) just to learn
 * that its input is [N, 3, 224, 224]. The protobuf is walked field by field with positioned
 * reads; nodes and initializers are skipped by their length prefix, only the small ValueInfo
 * messages of graph inputs and outputs are decoded.
 */

const { onnx } = onnxProto;

export interface GraphTensor {
  name: string;
  /** ONNX TensorProto.DataType (1 = float32, 7 = int64...); 0 when not a tensor. */
  elemType: number;
  /** Fixed sizes as numbers, symbolic or unknown ones as null. */
  shape: (number | null)[];
}

export interface GraphIo {
  inputs: GraphTensor[];
  outputs: GraphTensor[];
}

export const FLOAT_ELEM = onnx.TensorProto.DataType.FLOAT;

const MODEL_GRAPH = 7;
const GRAPH_INPUT = 11;
const GRAPH_OUTPUT = 12;
const WINDOW = 64 * 1024;
/** A graph input's ValueInfo is tiny; anything larger is not a well-formed model. */
const MAX_VALUE_INFO = 1 << 20;

/** Positioned reads through a small window: consecutive small fields cost one read. */
class Bytes {
  readonly #file: FileHandle;
  readonly size: number;
  #start = 0;
  #window = new Uint8Array(0);

  constructor(file: FileHandle, size: number) {
    this.#file = file;
    this.size = size;
  }

  async byte(position: number): Promise<number> {
    if (position < this.#start || position >= this.#start + this.#window.length) {
      const length = Math.min(WINDOW, this.size - position);
      if (length <= 0) throw new ShoalError(ErrorCode.MODEL_LOAD_FAILED, 'ONNX file ends inside a field');
      const buffer = new Uint8Array(length);
      await this.#file.read(buffer, 0, length, position);
      this.#start = position;
      this.#window = buffer;
    }
    return this.#window[position - this.#start] ?? 0;
  }

  async slice(position: number, length: number): Promise<Uint8Array> {
    const buffer = new Uint8Array(length);
    const { bytesRead } = await this.#file.read(buffer, 0, length, position);
    if (bytesRead !== length) throw new ShoalError(ErrorCode.MODEL_LOAD_FAILED, 'ONNX file ends inside a field');
    return buffer;
  }
}

async function varint(bytes: Bytes, position: number): Promise<{ value: number; next: number }> {
  let value = 0;
  let scale = 1;
  for (let i = 0; i < 10; i++) {
    const b = await bytes.byte(position + i);
    value += (b & 0x7f) * scale;
    if ((b & 0x80) === 0) return { value, next: position + i + 1 };
    scale *= 128;
  }
  throw new ShoalError(ErrorCode.MODEL_LOAD_FAILED, 'ONNX file has a malformed varint');
}

/** Calls `visit(field, start, length)` for each length-delimited field in [start, end), skipping the rest. */
async function walk(bytes: Bytes, start: number, end: number, visit: (field: number, start: number, length: number) => Promise<void>): Promise<void> {
  let position = start;
  while (position < end) {
    const tag = await varint(bytes, position);
    const field = Math.floor(tag.value / 8);
    const wire = tag.value % 8;
    position = tag.next;
    switch (wire) {
      case 0:
        position = (await varint(bytes, position)).next;
        break;
      case 1:
        position += 8;
        break;
      case 5:
        position += 4;
        break;
      case 2: {
        const length = await varint(bytes, position);
        await visit(field, length.next, length.value);
        position = length.next + length.value;
        break;
      }
      default:
        throw new ShoalError(ErrorCode.MODEL_LOAD_FAILED, `ONNX file has an unsupported protobuf wire type ${wire}`);
    }
  }
  if (position !== end) throw new ShoalError(ErrorCode.MODEL_LOAD_FAILED, 'ONNX file is truncated');
}

function toTensor(info: onnxProto.onnx.ValueInfoProto): GraphTensor {
  const tensor = info.type?.tensorType;
  const dims = tensor?.shape?.dim ?? [];
  return {
    name: info.name,
    elemType: tensor?.elemType ?? 0,
    shape: dims.map((d) => {
      const value = d.dimValue;
      if (value === null || value === undefined || d.dimParam) return null;
      const n = typeof value === 'number' ? value : value.toNumber();
      return n > 0 ? n : null;
    }),
  };
}

export async function readGraphIo(path: string): Promise<GraphIo> {
  let file: FileHandle;
  try {
    file = await open(path, 'r');
  } catch (error) {
    throw new ShoalError(ErrorCode.MODEL_LOAD_FAILED, `cannot read ONNX file ${path}`, { cause: error });
  }
  try {
    const bytes = new Bytes(file, (await file.stat()).size);
    const io: GraphIo = { inputs: [], outputs: [] };
    await walk(bytes, 0, bytes.size, async (field, start, length) => {
      if (field !== MODEL_GRAPH) return;
      await walk(bytes, start, start + length, async (inner, at, size) => {
        if (inner !== GRAPH_INPUT && inner !== GRAPH_OUTPUT) return;
        if (size > MAX_VALUE_INFO) throw new ShoalError(ErrorCode.MODEL_LOAD_FAILED, `${path}: a graph input/output description of ${size} bytes`);
        const tensor = toTensor(onnx.ValueInfoProto.decode(await bytes.slice(at, size)));
        (inner === GRAPH_INPUT ? io.inputs : io.outputs).push(tensor);
      });
    });
    return io;
  } catch (error) {
    if (error instanceof ShoalError) throw new ShoalError(error.code, `${path}: ${error.message}`, { cause: error });
    throw new ShoalError(ErrorCode.MODEL_LOAD_FAILED, `${path} is not a readable ONNX model: ${String(error)}`, { cause: error });
  } finally {
    await file.close();
  }
}

/**
 * The graph input holding images: float, 4-D, three channels first (NCHW) or last (NHWC), and a
 * batch axis that is not a fixed size above 1 (weights listed as inputs by old exporters have one).
 */
export function findImageInput(io: GraphIo): { input: GraphTensor; layout: 'chw' | 'hwc'; height: number | null; width: number | null } | null {
  for (const input of io.inputs) {
    if (input.elemType !== FLOAT_ELEM || input.shape.length !== 4) continue;
    const [batch, a, b, c] = input.shape;
    if (batch !== null && batch !== undefined && batch > 1) continue;
    if (a === 3) return { input, layout: 'chw', height: b ?? null, width: c ?? null };
    if (c === 3) return { input, layout: 'hwc', height: a ?? null, width: b ?? null };
  }
  return null;
}
