import { ErrorCode, ShoalError } from '../../protocol/errors.js';

/**
 * Message bodies with an encode result's vectors as float32 bytes instead of JSON numbers:
 * request-reply answers (`{ok: true, result}`) and job part results (`{status: 'ok', result}`).
 * A 384-dim embedding is ~8 KB of JSON that takes ~100 µs to print and parse on both sides; as
 * float32 it is 1.5 KB copied in a few µs, which matters when the whole NATS hop is budgeted at
 * 2 ms. The client asks for it with the request header `Shoal-Accept: f32-v1`; a worker that
 * packs a reply marks it `Shoal-Body: f32-v1` (older clients keep getting plain JSON). A bulk job
 * of 4,000 embeddings publishes 32 MB of JSON results otherwise, and printing them was half of
 * what a worker's main thread spent on the job; its part results are packed unless the job asks
 * for `result: {kind: 'stream', vectors: 'json'}`, marked with the same header.
 *
 * Layout: uint32 LE length L of the JSON part, L bytes of JSON, zero padding to a multiple of 4,
 * then float32 LE values. In the JSON, each item's `dense` is `{"$f32":[start,count]}` and its
 * `multivector` `{"$f32":[start,rows,cols]}`, offsets counted in floats. Values are the model's
 * float32 outputs (the JSON path prints the same values as float64 after post-processing, so
 * the two can differ in the last float32 digit).
 */

export const PACKED_FORMAT = 'f32-v1';
export const PACKED_HEADERS = Object.freeze({ accept: 'Shoal-Accept', body: 'Shoal-Body' });

type Marker = { $f32: number[] };

function isNumberArray(value: unknown): value is number[] {
  return Array.isArray(value) && value.every((x) => typeof x === 'number');
}

/** The result items of a successful reply or part result, or null for anything else. */
function items(reply: unknown): Record<string, unknown>[] | null {
  if (reply === null || typeof reply !== 'object' || !('result' in reply)) return null;
  const succeeded = ('ok' in reply && reply.ok === true) || ('status' in reply && reply.status === 'ok');
  if (!succeeded) return null;
  const result = reply.result;
  if (result === null || typeof result !== 'object' || !('items' in result) || !Array.isArray(result.items)) return null;
  return result.items.filter((item): item is Record<string, unknown> => item !== null && typeof item === 'object');
}

/** The reply packed, or null when it has no vectors to pack (send it as JSON). */
export function packReply(reply: unknown): Uint8Array | null {
  const list = items(reply);
  if (list === null) return null;
  const chunks: number[][] = [];
  let floats = 0;
  const packedItems = list.map((item) => {
    const out: Record<string, unknown> = { ...item };
    if (isNumberArray(item.dense)) {
      out.dense = { $f32: [floats, item.dense.length] } satisfies Marker;
      chunks.push(item.dense);
      floats += item.dense.length;
    }
    const rows = item.multivector;
    if (Array.isArray(rows) && rows.length > 0 && rows.every(isNumberArray)) {
      const cols = rows[0]?.length ?? 0;
      if (rows.every((row) => row.length === cols)) {
        out.multivector = { $f32: [floats, rows.length, cols] } satisfies Marker;
        for (const row of rows) chunks.push(row);
        floats += rows.length * cols;
      }
    }
    return out;
  });
  if (floats === 0) return null;
  const envelope = reply as { result: Record<string, unknown> };
  const json = Buffer.from(JSON.stringify({ ...envelope, result: { ...envelope.result, items: packedItems } }), 'utf8');
  const dataStart = 4 + Math.ceil(json.byteLength / 4) * 4;
  const body = new Uint8Array(dataStart + floats * 4);
  new DataView(body.buffer).setUint32(0, json.byteLength, true);
  body.set(json, 4);
  const values = new Float32Array(body.buffer, dataStart, floats);
  let at = 0;
  for (const chunk of chunks) {
    values.set(chunk, at);
    at += chunk.length;
  }
  return body;
}

function malformed(reason: string): ShoalError {
  return new ShoalError(ErrorCode.INTERNAL, `a packed (${PACKED_FORMAT}) reply is malformed: ${reason}`);
}

function marker(value: unknown, arity: number, total: number): number[] | null {
  if (value === null || typeof value !== 'object' || !('$f32' in value)) return null;
  const spec = value.$f32;
  if (!isNumberArray(spec) || spec.length !== arity || !spec.every((n) => Number.isInteger(n) && n >= 0)) throw malformed('bad vector marker');
  const size = spec.slice(1).reduce((a, b) => a * b, 1);
  if ((spec[0] ?? 0) + size > total) throw malformed('a vector runs past the end of the body');
  return spec;
}

/** The reply of a packed body as the plain JSON value (vectors as number arrays). */
export function unpackReply(data: Uint8Array): unknown {
  if (data.byteLength < 4) throw malformed('shorter than its length prefix');
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  const jsonLength = view.getUint32(0, true);
  const dataStart = 4 + Math.ceil(jsonLength / 4) * 4;
  if (dataStart > data.byteLength || (data.byteLength - dataStart) % 4 !== 0) throw malformed('lengths do not add up');
  let reply: unknown;
  try {
    reply = JSON.parse(Buffer.from(data.buffer, data.byteOffset + 4, jsonLength).toString('utf8'));
  } catch (error) {
    throw malformed(error instanceof Error ? error.message : String(error));
  }
  // Copied into a buffer of its own so the floats are aligned whatever the message's offset
  // (data may be a Node Buffer, whose slice() is a view, not a copy).
  const bytes = new Uint8Array(data.byteLength - dataStart);
  bytes.set(data.subarray(dataStart));
  const values = new Float32Array(bytes.buffer);
  for (const item of items(reply) ?? []) {
    const dense = marker(item.dense, 2, values.length);
    if (dense !== null) {
      const [start = 0, count = 0] = dense;
      item.dense = Array.from(values.subarray(start, start + count));
    }
    const multi = marker(item.multivector, 3, values.length);
    if (multi !== null) {
      const [start = 0, rows = 0, cols = 0] = multi;
      item.multivector = Array.from({ length: rows }, (_, r) => Array.from(values.subarray(start + r * cols, start + (r + 1) * cols)));
    }
  }
  return reply;
}
