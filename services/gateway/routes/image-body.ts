import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { ErrorCode, ShoalError } from '../../../adapters/protocol/errors.js';
import { Priority } from '../../../adapters/protocol/requests.js';
import { parseWith } from '../../../adapters/protocol/validate.js';

/**
 * Raw image bodies on POST /v1/encode and /v1/extract: `Content-Type: image/*` or
 * `application/octet-stream`, the bytes of one image, and the request's other fields in the query
 * string (`?model=...&top_k=5`). The body becomes a one-item request `{model, items: [{image}]}`
 * (bytes, not base64: a third smaller on the wire, no JSON escaping), validated like a JSON one.
 */


declare module 'fastify' {
  interface FastifyContextConfig {
    /** The route takes a raw image body (set by the primitive routes that declare `imageBody`); every other route takes JSON only. */
    imageBody?: boolean;
  }
}

/** Whether a request's content type is one of the binary types parsed below. */
function isBinaryType(contentType: string | undefined): boolean {
  const type = (contentType ?? '').split(';', 1)[0]?.trim().toLowerCase() ?? '';
  return type === 'application/octet-stream' || /^image\/[a-z0-9.+-]+$/.test(type);
}

/**
 * Refuses, before the body is read, what no route can parse: a compressed body (fastify does not
 * inflate, so gzip read as "not valid JSON") and a binary body on a JSON route. The latter used to
 * reach the schema as a Buffer whose every byte index zod listed as an unknown key: a 4 MB body
 * gave a 100 MB error and stalled the gateway for seconds.
 */
export function checkBodyType(request: FastifyRequest): void {
  const encoding = request.headers['content-encoding']?.trim().toLowerCase();
  if (encoding !== undefined && encoding !== '' && encoding !== 'identity') {
    throw new ShoalError(ErrorCode.UNSUPPORTED_MEDIA_TYPE, `Content-Encoding ${encoding.slice(0, 40)} is not accepted: send the body uncompressed`);
  }
  if (isBinaryType(request.headers['content-type']) && request.routeOptions.config.imageBody !== true) {
    throw new ShoalError(ErrorCode.UNSUPPORTED_MEDIA_TYPE, `${request.routeOptions.url ?? 'this route'} takes JSON: send Content-Type: application/json (raw image bodies go to /v1/encode and /v1/extract)`);
  }
}

/** Binary bodies arrive as Buffers (within the app's body limit); JSON keeps its own parser. */
export function registerImageBodyParser(app: FastifyInstance): void {
  const passBytes = (_request: FastifyRequest, body: Buffer | string, done: (error: Error | null, body?: unknown) => void): void => done(null, body);
  app.addContentTypeParser('application/octet-stream', { parseAs: 'buffer' }, passBytes);
  app.addContentTypeParser(/^image\/[a-z0-9.+-]+$/i, { parseAs: 'buffer' }, passBytes);
}

const CommaList = z.string().transform((value) => value.split(',').map((part) => part.trim()).filter((part) => part !== ''));
const Decimal = z.string().regex(/^\d+(\.\d+)?$/, 'must be a number').transform(Number);
const Whole = z.string().regex(/^\d+$/, 'must be a whole number').transform(Number);
const Flag = z.enum(['true', 'false']).transform((value) => value === 'true');

const Common = { model: z.string(), id: z.string().optional(), priority: Priority.optional() };

export const EncodeQuery = z.strictObject({ ...Common, output_types: CommaList.optional(), normalize: Flag.optional() });
export const ExtractQuery = z.strictObject({ ...Common, labels: CommaList.optional(), threshold: Decimal.optional(), top_k: Whole.optional() });

/**
 * The wire request for a raw image body, or the JSON body unchanged. The result still goes
 * through the primitive's schema, so limits and errors are those of a JSON request.
 */
export function requestFromBody(request: FastifyRequest, primitive: 'encode' | 'extract'): unknown {
  if (!Buffer.isBuffer(request.body)) return request.body;
  if (request.body.byteLength === 0) throw new ShoalError(ErrorCode.INVALID_INPUT, 'the request body is empty: send the image bytes');
  const query = parseWith(primitive === 'encode' ? EncodeQuery : ExtractQuery, request.query ?? {}, `${primitive} query string (an image body takes its fields from the query: ?model=...)`);
  const { id, ...fields } = query;
  const image = new Uint8Array(request.body.buffer, request.body.byteOffset, request.body.byteLength);
  return { ...fields, items: [id === undefined ? { image } : { id, image }] };
}
