import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { ErrorCode, ShoalError } from '../../../adapters/protocol/errors.js';
import { DEFAULT_LIMITS } from '../../../adapters/protocol/limits.js';
import { ModelRef, TextItem } from '../../../adapters/protocol/requests.js';
import { parseWith } from '../../../adapters/protocol/validate.js';
import type { RouteContext } from '../context.js';
import { OTHER_MODEL } from '../request-metrics.js';
import { denseVectors, shortenVector } from './vectors.js';

/**
 * text-embeddings-inference compatible routes, so TEI clients work unchanged:
 * POST /embed `{inputs, normalize?, truncate?, prompt_name?, dimensions?}` → `number[][]` and
 * POST /rerank `{query, texts, return_text?, ...}` → `[{index, score, text?}]`, best first.
 *
 * TEI serves one model per server and its requests name none, so the model is the gateway's
 * configured embed / rerank model (--embed-model, --rerank-model); any other model is reached by
 * prefixing the route with it: `/models/BAAI/bge-small-en-v1.5/embed`, `/models/<name>/rerank`.
 *
 * As in TEI, `truncate` defaults to false and an /embed input longer than the model's maximum is
 * refused (413) rather than cut silently. Differences: /rerank always truncates pairs (the engine
 * reports no per-pair truncation); `raw_scores` (logits instead of the model's activation) and
 * `truncation_direction: Left` are refused, as Shoal's engine offers neither. Unknown fields are
 * ignored, as TEI does.
 */

const Text = TextItem.shape.text;
const Texts = z.array(Text).min(1, 'must not be empty').max(DEFAULT_LIMITS.maxItemsPerRequest);
const Direction = z.enum(['Left', 'Right', 'left', 'right']).default('Right');
/**
 * TEI declares `truncate`, `prompt_name` and `dimensions` as optional (nullable in its OpenAPI
 * schema), and clients generated from that schema send `null` for unset fields: null means unset.
 */
const Truncate = z.boolean().nullish().transform((value) => value ?? false);
const Unset = <T>(value: T | null | undefined): T | undefined => value ?? undefined;

export const TeiEmbedBody = z.object({
  inputs: z.union([Text, Texts]),
  normalize: z.boolean().default(true),
  truncate: Truncate,
  truncation_direction: Direction,
  prompt_name: z.string().max(DEFAULT_LIMITS.maxLabelChars).nullish().transform(Unset),
  dimensions: z.number().int().min(1).nullish().transform(Unset),
});

export const TeiRerankBody = z.object({
  query: Text,
  texts: Texts,
  raw_scores: z.boolean().default(false),
  return_text: z.boolean().default(false),
  truncate: Truncate,
  truncation_direction: Direction,
});

const ModelPath = z.union([
  z.strictObject({ org: z.string().min(1), name: z.string().min(1) }).transform(({ org, name }) => `${org}/${name}`),
  z.strictObject({ name: z.string().min(1) }).transform(({ name }) => name),
]);

function refuseLeftTruncation(direction: string): void {
  if (direction.toLowerCase() === 'left') {
    throw new ShoalError(ErrorCode.UNSUPPORTED_OPERATION, 'truncation_direction Left is not supported: inputs are cut at the end (Right)');
  }
}

/** The model of a TEI request: from the route prefix, else the configured default for the route. */
function teiModel(request: FastifyRequest, fallback: string | null, kind: 'embed' | 'rerank'): string {
  const params = request.params;
  if (typeof params === 'object' && params !== null && Object.keys(params).length > 0) {
    return parseWith(ModelRef, parseWith(ModelPath, params, 'model path'), 'model path');
  }
  if (fallback === null) {
    const flag = kind === 'embed' ? '--embed-model (SHOAL_EMBED_MODEL)' : '--rerank-model (SHOAL_RERANK_MODEL)';
    throw new ShoalError(ErrorCode.MODEL_NOT_FOUND, `no default ${kind} model is configured: start the gateway with ${flag}, or call /models/<org>/<name>/${kind}`);
  }
  return fallback;
}

export function registerTeiRoutes(app: FastifyInstance, context: RouteContext): void {
  const embed = async (request: FastifyRequest, reply: FastifyReply): Promise<number[][]> => {
    context.metrics.track(request, { primitive: 'encode', model: OTHER_MODEL });
    const model = teiModel(request, context.settings.embedModel, 'embed');
    const body = parseWith(TeiEmbedBody, request.body, 'embed request');
    refuseLeftTruncation(body.truncation_direction);
    context.metrics.track(request, { primitive: 'encode', model });
    const texts = typeof body.inputs === 'string' ? [body.inputs] : body.inputs;
    const result = await context.call(reply)((signal) =>
      context.deps.engine.encode(
        { model, items: texts.map((text) => ({ text })), output_types: ['dense'], normalize: body.normalize, prompt: body.prompt_name },
        { signal },
      ),
    );
    if (!body.truncate) {
      const cut = result.items.find((item) => item.truncated === true);
      if (cut !== undefined) {
        throw new ShoalError(ErrorCode.INPUT_TOO_LARGE, `input ${cut.index} is longer than the model's maximum length; shorten it or send "truncate": true`, {
          details: { index: cut.index },
        });
      }
    }
    const vectors = denseVectors(result, model);
    // As TEI: cut first, then normalize only when asked (the engine already normalized the full vector).
    return body.dimensions === undefined ? vectors : vectors.map((vector) => shortenVector(vector, body.dimensions ?? vector.length, body.normalize));
  };

  const rerank = async (request: FastifyRequest, reply: FastifyReply): Promise<Array<{ index: number; score: number; text?: string }>> => {
    context.metrics.track(request, { primitive: 'score', model: OTHER_MODEL });
    const model = teiModel(request, context.settings.rerankModel, 'rerank');
    const body = parseWith(TeiRerankBody, request.body, 'rerank request');
    refuseLeftTruncation(body.truncation_direction);
    if (body.raw_scores) {
      throw new ShoalError(ErrorCode.UNSUPPORTED_OPERATION, "raw_scores is not supported: scores are the model's own activation (e.g. sigmoid of the logit)");
    }
    context.metrics.track(request, { primitive: 'score', model });
    const result = await context.call(reply)((signal) =>
      context.deps.engine.score({ model, query: body.query, items: body.texts.map((text) => ({ text })) }, { signal }),
    );
    return result.scores.map(({ index, score }) => (body.return_text ? { index, score, text: body.texts[index] ?? '' } : { index, score }));
  };

  app.post('/embed', embed);
  app.post('/models/:name/embed', embed);
  app.post('/models/:org/:name/embed', embed);
  app.post('/rerank', rerank);
  app.post('/models/:name/rerank', rerank);
  app.post('/models/:org/:name/rerank', rerank);
}
