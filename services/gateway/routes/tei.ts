import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { ErrorCode, ShoalError } from '../../../adapters/protocol/errors.js';
import { DEFAULT_LIMITS } from '../../../adapters/protocol/limits.js';
import { ScoreRequest, TextItem } from '../../../adapters/protocol/requests.js';
import { parseWith } from '../../../adapters/protocol/validate.js';
import type { RouteContext } from '../context.js';
import { OTHER_MODEL } from '../request-metrics.js';
import {
  Direction,
  EMBED_MODEL_SETTING,
  PromptName,
  RERANK_MODEL_SETTING,
  TeiInputs,
  Truncate,
  Unset,
  inputTexts,
  refuseLeftTruncation,
  refuseTruncated,
  teiModel,
  teiPaths,
} from './tei-common.js';
import { denseVectors, shortenVector } from './vectors.js';

/**
 * text-embeddings-inference compatible routes, so TEI clients work unchanged:
 * POST /embed `{inputs, normalize?, truncate?, prompt_name?, dimensions?}` → `number[][]` and
 * POST /rerank `{query, texts, return_text?, ...}` → `[{index, score, text?}]`, best first.
 * (/embed_sparse, /tokenize and /info are in tei-sparse.ts, tei-tokenize.ts and tei-info.ts.)
 *
 * The model is the gateway's configured embed / rerank model, or the route's model prefix
 * (tei-common.ts).
 *
 * As in TEI, `truncate` defaults to false and an /embed input longer than the model's maximum is
 * refused (413) rather than cut silently, and an empty input is refused (TEI answers 400 "`inputs`
 * cannot be empty"; Shoal 422 INVALID_INPUT, as every malformed field). Differences: /rerank always
 * truncates pairs (the engine reports no per-pair truncation); `raw_scores` (logits instead of the
 * model's activation) and `truncation_direction: Left` are refused, as Shoal's engine offers
 * neither. Unknown fields are ignored, as TEI does.
 */

const Text = TextItem.shape.text;
const Texts = z.array(Text).min(1, 'must not be empty').max(DEFAULT_LIMITS.maxItemsPerRequest);

export const TeiEmbedBody = z.object({
  inputs: TeiInputs,
  normalize: z.boolean().default(true),
  truncate: Truncate,
  truncation_direction: Direction,
  prompt_name: PromptName,
  dimensions: z.number().int().min(1).nullish().transform(Unset),
});

export const TeiRerankBody = z.object({
  query: Text,
  texts: Texts,
  /** Shoal's extension: the task instruction of a causal-LM reranker's prompt (Qwen3-Reranker), as /v1/score's. */
  instruction: ScoreRequest.shape.instruction,
  raw_scores: z.boolean().default(false),
  return_text: z.boolean().default(false),
  truncate: Truncate,
  truncation_direction: Direction,
});

export function registerTeiRoutes(app: FastifyInstance, context: RouteContext): void {
  const embed = async (request: FastifyRequest, reply: FastifyReply): Promise<number[][]> => {
    context.metrics.track(request, { primitive: 'encode', model: OTHER_MODEL });
    const model = teiModel(request, { model: context.settings.embedModel, route: 'embed', setting: EMBED_MODEL_SETTING });
    const body = parseWith(TeiEmbedBody, request.body, 'embed request');
    refuseLeftTruncation(body.truncation_direction);
    context.metrics.track(request, { primitive: 'encode', model });
    const texts = inputTexts(body.inputs);
    const result = await context.call(reply)((signal) =>
      context.deps.engine.encode(
        { model, items: texts.map((text) => ({ text })), output_types: ['dense'], normalize: body.normalize, prompt: body.prompt_name },
        { signal },
      ),
    );
    if (!body.truncate) refuseTruncated(result);
    const vectors = denseVectors(result, model);
    // As TEI: cut first, then normalize only when asked (the engine already normalized the full vector).
    return body.dimensions === undefined ? vectors : vectors.map((vector) => shortenVector(vector, body.dimensions ?? vector.length, body.normalize));
  };

  const rerank = async (request: FastifyRequest, reply: FastifyReply): Promise<Array<{ index: number; score: number; text?: string }>> => {
    context.metrics.track(request, { primitive: 'score', model: OTHER_MODEL });
    const model = teiModel(request, { model: context.settings.rerankModel, route: 'rerank', setting: RERANK_MODEL_SETTING });
    const body = parseWith(TeiRerankBody, request.body, 'rerank request');
    refuseLeftTruncation(body.truncation_direction);
    if (body.raw_scores) {
      throw new ShoalError(ErrorCode.UNSUPPORTED_OPERATION, "raw_scores is not supported: scores are the model's own activation (e.g. sigmoid of the logit)");
    }
    context.metrics.track(request, { primitive: 'score', model });
    const result = await context.call(reply)((signal) =>
      context.deps.engine.score(
        { model, query: body.query, items: body.texts.map((text) => ({ text })), ...(body.instruction === undefined ? {} : { instruction: body.instruction }) },
        { signal },
      ),
    );
    return result.scores.map(({ index, score }) => (body.return_text ? { index, score, text: body.texts[index] ?? '' } : { index, score }));
  };

  for (const path of teiPaths('embed')) app.post(path, embed);
  for (const path of teiPaths('rerank')) app.post(path, rerank);
}
