import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { DEFAULT_LIMITS } from '../../../adapters/protocol/limits.js';
import { DEFAULT_ADMISSION } from '../admission.js';
import type { RouteContext } from '../context.js';
import { shoalVersion } from '../../settings/package-version.js';
import { EMBED_MODEL_SETTING, hasModelPrefix, teiModel, teiPaths } from './tei-common.js';

/**
 * TEI's GET /info, in TEI's shape, for the model the TEI routes serve: the embed model, else the
 * rerank model, else the sparse model (or the route's prefix: `/models/<org>/<name>/info`).
 *
 * Known facts: `model_id` / `served_model_name`; `max_input_length` (tokens, special tokens
 * included: the model's own maximum, learned from its tokenizer, model-facts.ts);
 * `max_client_batch_size` (inputs one request may hold); `auto_truncate: false` (/embed refuses a
 * too-long input unless `truncate` is sent); `version` (Shoal's own, not a TEI version).
 * Approximations, as the gateway does not see the workers' settings:
 * - `model_type`: `reranker` for the rerank model or a cross-encoder, `embedding` otherwise, with
 *   `pooling` "splade" for a SPLADE model and "unknown" for the rest; a reranker's `id2label` and
 *   `label2id` are empty (the label names stay with the model);
 * - `model_dtype`: "float32", the dtype of the vectors returned (workers may run int8 weights);
 * - `max_concurrent_requests`: the admission budget of in-flight items per model, which bounds
 *   the concurrent requests (each holds at least one item; more are refused with 429);
 * - `max_batch_tokens`: `max_input_length` (Shoal batches across requests itself, by a padded-token
 *   budget of each worker; any input up to the maximum runs);
 * - `model_sha`, `max_batch_requests`, `tokenization_workers`, `sha`, `docker_label`: null.
 */

type ModelType = { embedding: { pooling: string } } | { reranker: { id2label: Record<string, string>; label2id: Record<string, number> } };

type Role = 'embed' | 'rerank' | 'sparse' | 'prefix';

export interface TeiInfo {
  model_id: string;
  model_sha: null;
  model_dtype: string;
  served_model_name: string;
  model_type: ModelType;
  max_concurrent_requests: number;
  max_input_length: number;
  max_batch_tokens: number;
  max_batch_requests: null;
  max_client_batch_size: number;
  auto_truncate: boolean;
  tokenization_workers: null;
  version: string;
  sha: null;
  docker_label: null;
}

function modelType(role: Role, family: string | undefined): ModelType {
  if (family === 'cross-encoder' || (family === undefined && role === 'rerank')) return { reranker: { id2label: {}, label2id: {} } };
  const sparse = family === 'splade' || (family === undefined && role === 'sparse');
  return { embedding: { pooling: sparse ? 'splade' : 'unknown' } };
}

export function registerTeiInfoRoutes(app: FastifyInstance, context: RouteContext): void {
  /** The default model of /info and the role it is configured for. */
  const configured = (): { model: string | null; role: Role } => {
    const { embedModel, rerankModel, sparseModel } = context.settings;
    if (embedModel !== null) return { model: embedModel, role: 'embed' };
    if (rerankModel !== null) return { model: rerankModel, role: 'rerank' };
    return { model: sparseModel ?? null, role: 'sparse' };
  };

  const info = async (request: FastifyRequest, reply: FastifyReply): Promise<TeiInfo> => {
    const fallback = configured();
    const model = teiModel(request, { model: fallback.model, route: 'info', setting: EMBED_MODEL_SETTING });
    const role: Role = hasModelPrefix(request) ? 'prefix' : fallback.role;
    const [facts, cards] = await context.call(reply)(() => Promise.all([context.modelFacts.get(model), context.deps.models()]));
    const family = cards.find((card) => card.id === model)?.family;
    return {
      model_id: model,
      model_sha: null,
      model_dtype: 'float32',
      served_model_name: model,
      model_type: modelType(role, family),
      max_concurrent_requests: (context.settings.admission ?? DEFAULT_ADMISSION).maxInFlightItemsPerModel,
      max_input_length: facts.maxInputLength,
      max_batch_tokens: facts.maxInputLength,
      max_batch_requests: null,
      max_client_batch_size: DEFAULT_LIMITS.maxItemsPerRequest,
      auto_truncate: false,
      tokenization_workers: null,
      version: shoalVersion(),
      sha: null,
      docker_label: null,
    };
  };

  for (const path of teiPaths('info')) app.get(path, info);
}
