import { headers as natsHeaders, type MsgHdrs } from '@nats-io/transport-node';
import { PACKED_FORMAT, PACKED_HEADERS, unpackReply } from './packed-vectors.js';

/**
 * What the request-reply client and the workers agree on besides the zod schemas: header names
 * and JSON encoding (image bytes become base64, since JSON cannot carry them).
 */

export const RPC_HEADERS = Object.freeze({
  /** How long the caller waits: the worker drops work the caller has given up on. */
  timeoutMs: 'Shoal-Timeout-Ms',
  /** On replies: milliseconds the worker spent on the request, receipt to reply (the rest of a call's time is transport). */
  workerMs: 'Shoal-Worker-Ms',
});

/** The worker's time from a reply's headers, or null when it has none. */
export function workerMs(h: MsgHdrs | undefined): number | null {
  const raw = h?.get(RPC_HEADERS.workerMs);
  if (raw === undefined || raw === '') return null;
  const ms = Number(raw);
  return Number.isFinite(ms) && ms >= 0 ? ms : null;
}

/** Values JSON cannot carry, made JSON-safe: Uint8Array image bytes → `{base64}`. */
export function jsonSafe(value: unknown): unknown {
  if (value instanceof Uint8Array) return { base64: Buffer.from(value).toString('base64') };
  if (Array.isArray(value)) return value.map(jsonSafe);
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, jsonSafe(v)]));
  }
  return value;
}

export function encodeJson(value: unknown): Uint8Array {
  return Buffer.from(JSON.stringify(value), 'utf8');
}

/** Parses a message body as JSON; when it is not JSON, says why (the caller decides what that means). */
export function decodeJson(data: Uint8Array): { ok: true; value: unknown } | { ok: false; reason: string } {
  try {
    return { ok: true, value: JSON.parse(Buffer.from(data.buffer, data.byteOffset, data.byteLength).toString('utf8')) };
  } catch (error) {
    return { ok: false, reason: error instanceof Error ? error.message : String(error) };
  }
}

/** Request headers: the caller's timeout, and that it reads packed (float32) vector replies. */
export function requestHeaders(timeoutMs: number): MsgHdrs {
  const h = natsHeaders();
  h.set(RPC_HEADERS.timeoutMs, String(Math.round(timeoutMs)));
  h.set(PACKED_HEADERS.accept, PACKED_FORMAT);
  return h;
}

/** The caller's timeout from the headers, capped; null when absent or not a number. */
export function callerTimeout(h: MsgHdrs | undefined, capMs: number): number | null {
  const raw = h?.get(RPC_HEADERS.timeoutMs);
  if (raw === undefined || raw === '') return null;
  const ms = Number(raw);
  return Number.isFinite(ms) && ms > 0 ? Math.min(ms, capMs) : null;
}

/** A message body as its JSON value, unpacking it when its headers say it is packed; says why when it cannot. */
export function decodeBody(data: Uint8Array, headers: MsgHdrs | undefined): { ok: true; value: unknown } | { ok: false; reason: string } {
  if (headers?.get(PACKED_HEADERS.body) !== PACKED_FORMAT) return decodeJson(data);
  try {
    return { ok: true, value: unpackReply(data) };
  } catch (error) {
    return { ok: false, reason: error instanceof Error ? error.message : String(error) };
  }
}

/** Headers marking a packed body. */
export function packedHeaders(): MsgHdrs {
  const h = natsHeaders();
  h.set(PACKED_HEADERS.body, PACKED_FORMAT);
  return h;
}
