import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { ErrorCode, ShoalError } from '../../../adapters/protocol/errors.js';
import { DEFAULT_LIMITS } from '../../../adapters/protocol/limits.js';
import { ModelRef, TextItem } from '../../../adapters/protocol/requests.js';
import { parseWith } from '../../../adapters/protocol/validate.js';
import type { RouteContext } from '../context.js';
import { OTHER_MODEL } from '../request-metrics.js';
import { denseVectors, shortenVector } from './vectors.js';

/**
 * OpenAI-compatible POST /v1/embeddings, so the `openai` client's `embeddings.create` (and every
 * tool built on it) works against Shoal unchanged: `input` is a string or a list of strings,
 * `encoding_format` float or base64 (little-endian float32 bytes, what the client asks for by
 * default and decodes itself), `usage.prompt_tokens` is the real token count.
 *
 * `dimensions` keeps the first N values and L2-normalizes them again: right for Matryoshka-trained
 * models (nomic, mxbai, bge-m3, OpenAI's own v3 models), a lossy cut for others, which is the
 * caller's choice as in OpenAI's API; more dimensions than the model has is refused.
 * Token-id inputs (arrays of integers) are refused with a clear message: Shoal tokenizes with each
 * model's own tokenizer and has no shared vocabulary to accept ids in. An empty input (`""`, `[]`,
 * or `""` in a list) is refused as OpenAI refuses it, in this route's shape of every malformed
 * field: 422 INVALID_INPUT naming `input` (OpenAI answers 400 invalid_request_error).
 */

/** OpenAI refuses an empty string (400 invalid_request_error): there is nothing to embed. */
const Text = TextItem.shape.text.min(1, 'must not be an empty string');

export const EmbeddingsBody = z.strictObject({
  input: z.union([Text, z.array(Text).min(1, 'input must not be empty').max(DEFAULT_LIMITS.maxItemsPerRequest)]),
  model: ModelRef,
  encoding_format: z.enum(['float', 'base64']).default('float'),
  dimensions: z.number().int().min(1).optional(),
  /** Accepted for compatibility (end-user id for abuse monitoring); not used. */
  user: z.string().max(512).optional(),
});

/** `input` given as token ids: one list of integers, or a list of such lists. */
const TokenIdInput = z.object({
  input: z.union([z.array(z.number()).min(1), z.array(z.array(z.number())).min(1)]),
});

function checkNotTokenIds(body: unknown): void {
  if (!TokenIdInput.safeParse(body).success) return;
  throw new ShoalError(
    ErrorCode.INVALID_INPUT,
    'invalid embeddings request: input: token-id arrays are not supported; send the text as a string or an array of strings',
    { details: { issues: [{ path: ['input'], message: 'token-id arrays are not supported' }] } },
  );
}

/** Float32 little-endian bytes, base64: the format OpenAI's clients decode. */
export function float32Base64(vector: readonly number[]): string {
  const bytes = Buffer.alloc(vector.length * 4);
  vector.forEach((value, index) => bytes.writeFloatLE(value, index * 4));
  return bytes.toString('base64');
}

export function registerOpenAiRoutes(app: FastifyInstance, context: RouteContext): void {
  app.post('/v1/embeddings', async (request, reply) => {
    context.metrics.track(request, { primitive: 'encode', model: OTHER_MODEL });
    checkNotTokenIds(request.body);
    const body = parseWith(EmbeddingsBody, request.body, 'embeddings request');
    context.metrics.track(request, { primitive: 'encode', model: body.model });
    const texts = typeof body.input === 'string' ? [body.input] : body.input;
    const result = await context.call(reply)((signal) =>
      context.deps.engine.encode({ model: body.model, items: texts.map((text) => ({ text })), output_types: ['dense'] }, { signal }),
    );
    const vectors = denseVectors(result, body.model).map((vector) => (body.dimensions === undefined ? vector : shortenVector(vector, body.dimensions)));
    return {
      object: 'list',
      data: vectors.map((vector, index) => ({
        object: 'embedding',
        index,
        embedding: body.encoding_format === 'base64' ? float32Base64(vector) : vector,
      })),
      model: body.model,
      usage: { prompt_tokens: result.usage.tokens, total_tokens: result.usage.tokens },
    };
  });
}
