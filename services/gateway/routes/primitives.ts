import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { CallOptions, Engine } from '../../../adapters/protocol/engine.js';
import { EncodeRequest, ExtractRequest, ScoreRequest, TokenizeRequest, type Priority } from '../../../adapters/protocol/requests.js';
import { valuesToBase64, type EmbeddingDtype } from '../../../adapters/protocol/output-types.js';
import type { EncodeResult } from '../../../adapters/protocol/results.js';
import { parseWith } from '../../../adapters/protocol/validate.js';
import type { RouteContext } from '../context.js';
import { OTHER_MODEL, type TrackedPrimitive } from '../request-metrics.js';
import { registerImageBodyParser, requestFromBody } from './image-body.js';

/**
 * POST /v1/encode | /v1/score | /v1/extract | /v1/tokenize: the wire request of the primitive in,
 * its result out, synchronously. One function registers all four, so validation, metrics,
 * cancellation and the deadline are the same code for each. /v1/encode and /v1/extract also take
 * one raw image as the body (image-body.ts).
 */

type Wire = z.ZodType<{ model: string; priority?: Priority | undefined }>;

interface PrimitiveRoute<S extends Wire> {
  path: string;
  primitive: TrackedPrimitive;
  what: string;
  schema: S;
  /** Accepts a raw image body (fields in the query string). */
  imageBody?: 'encode' | 'extract';
  invoke(engine: Engine, request: z.output<S>, options: CallOptions): Promise<unknown>;
}

function addPrimitiveRoute<S extends Wire>(app: FastifyInstance, context: RouteContext, definition: PrimitiveRoute<S>): void {
  const { path, primitive, what, schema, invoke, imageBody } = definition;
  app.post(path, { config: { imageBody: imageBody !== undefined } }, async (request, reply) => {
    // Tracked before parsing so invalid requests are counted too (under the model label `other`).
    context.metrics.track(request, { primitive, model: OTHER_MODEL });
    const body = imageBody === undefined ? request.body : requestFromBody(request, imageBody);
    const parsed = parseWith(schema, body, what);
    context.metrics.track(request, { primitive, model: parsed.model, lane: parsed.priority });
    return context.call(reply)((signal) => invoke(context.deps.engine, parsed, { signal }));
  });
}

/**
 * /v1/encode adds `encoding_format`, as OpenAI's API spells it: `base64` sends each dense vector as
 * the base64 of its packed values in the requested `dtype` (float32/float16 little-endian, one byte
 * per value otherwise): a quarter of the JSON for float32, a 32nd for binary.
 */
export const HttpEncodeRequest = EncodeRequest.extend({ encoding_format: z.enum(['float', 'base64']).optional() });

function withBase64Vectors(result: EncodeResult, dtype: EmbeddingDtype): object {
  return { ...result, items: result.items.map((item) => (item.dense === undefined ? item : { ...item, dense: valuesToBase64(item.dense, dtype) })) };
}

export function registerPrimitiveRoutes(app: FastifyInstance, context: RouteContext): void {
  registerImageBodyParser(app);
  addPrimitiveRoute(app, context, {
    path: '/v1/encode',
    primitive: 'encode',
    what: 'encode request',
    schema: HttpEncodeRequest,
    imageBody: 'encode',
    invoke: async (e, { encoding_format: format, ...r }, o) => {
      const result = await e.encode(r, o);
      return format === 'base64' ? withBase64Vectors(result, r.dtype ?? 'float32') : result;
    },
  });
  addPrimitiveRoute(app, context, { path: '/v1/score', primitive: 'score', what: 'score request', schema: ScoreRequest, invoke: (e, r, o) => e.score(r, o) });
  addPrimitiveRoute(app, context, {
    path: '/v1/extract',
    primitive: 'extract',
    what: 'extract request',
    schema: ExtractRequest,
    imageBody: 'extract',
    invoke: (e, r, o) => e.extract(r, o),
  });
  addPrimitiveRoute(app, context, {
    path: '/v1/tokenize',
    primitive: 'tokenize',
    what: 'tokenize request',
    schema: TokenizeRequest,
    invoke: (e, r, o) => e.tokenize(r, o),
  });
}
