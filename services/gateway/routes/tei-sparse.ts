import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { ErrorCode, ShoalError } from '../../../adapters/protocol/errors.js';
import type { EncodeResult } from '../../../adapters/protocol/results.js';
import { parseWith } from '../../../adapters/protocol/validate.js';
import type { RouteContext } from '../context.js';
import { OTHER_MODEL } from '../request-metrics.js';
import { Direction, EMBED_MODEL_SETTING, PromptName, SPARSE_MODEL_SETTING, TeiInputs, Truncate, inputTexts, refuseLeftTruncation, refuseTruncated, teiModel, teiPaths } from './tei-common.js';

/**
 * TEI's POST /embed_sparse `{inputs, truncate?, truncation_direction?, prompt_name?}` → for each
 * input, its non-zero term weights as `[{index, value}]` (index = vocabulary id, ascending), what a
 * SPLADE model's sparse encoding is.
 *
 * The model: the route's prefix (`/models/naver/splade-v3/embed_sparse`), else the gateway's
 * `sparseModel` (--sparse-model), else its embed model: a TEI server serves one model, and one started with a
 * SPLADE model answers /embed_sparse with it, so a gateway whose --embed-model is a SPLADE model
 * does the same. A model without sparse output is refused (400 UNSUPPORTED_OPERATION) by the engine.
 * As /embed: `truncate` defaults to false (a too-long input is 413), an empty input is refused,
 * `truncation_direction: Left` is refused.
 */

export const TeiSparseBody = z.object({
  inputs: TeiInputs,
  truncate: Truncate,
  truncation_direction: Direction,
  prompt_name: PromptName,
});

export interface SparseValue {
  index: number;
  value: number;
}

/** Each item's sparse vector as TEI's list of `{index, value}`, in request order. */
export function teiSparse(result: EncodeResult, model: string): SparseValue[][] {
  const out: SparseValue[][] = new Array<SparseValue[]>(result.items.length);
  for (const item of result.items) {
    if (item.sparse === undefined) {
      throw new ShoalError(ErrorCode.UNSUPPORTED_OPERATION, `model ${model} returned no sparse vector; use a sparse (SPLADE) model here`);
    }
    const { indices, values } = item.sparse;
    out[item.index] = indices.map((index, k) => ({ index, value: values[k] ?? 0 }));
  }
  return out;
}

export function registerTeiSparseRoutes(app: FastifyInstance, context: RouteContext): void {
  const embedSparse = async (request: FastifyRequest, reply: FastifyReply): Promise<SparseValue[][]> => {
    context.metrics.track(request, { primitive: 'encode', model: OTHER_MODEL });
    const fallback = context.settings.sparseModel ?? context.settings.embedModel;
    const model = teiModel(request, { model: fallback, route: 'embed_sparse', setting: `${SPARSE_MODEL_SETTING} or a sparse model as ${EMBED_MODEL_SETTING}` });
    const body = parseWith(TeiSparseBody, request.body, 'embed_sparse request');
    refuseLeftTruncation(body.truncation_direction);
    context.metrics.track(request, { primitive: 'encode', model });
    const texts = inputTexts(body.inputs);
    const result = await context.call(reply)((signal) =>
      context.deps.engine.encode({ model, items: texts.map((text) => ({ text })), output_types: ['sparse'], prompt: body.prompt_name }, { signal }),
    );
    if (!body.truncate) refuseTruncated(result);
    return teiSparse(result, model);
  };

  for (const path of teiPaths('embed_sparse')) app.post(path, embedSparse);
}
