import type { FastifyRequest } from 'fastify';
import { z } from 'zod';
import { ErrorCode, ShoalError } from '../../../adapters/protocol/errors.js';
import { DEFAULT_LIMITS } from '../../../adapters/protocol/limits.js';
import { ModelRef, TextItem } from '../../../adapters/protocol/requests.js';
import type { EncodeResult } from '../../../adapters/protocol/results.js';
import { parseWith } from '../../../adapters/protocol/validate.js';

/**
 * What the text-embeddings-inference routes (tei.ts, tei-sparse.ts, tei-tokenize.ts, tei-info.ts)
 * share: the `inputs` field, TEI's nullable options, and how a route finds its model.
 *
 * TEI serves one model per server and its requests name none, so each route has a configured
 * default (the gateway's --embed-model / --rerank-model, `sparseModel` for /embed_sparse); any
 * other model is reached by prefixing the route with it: `/models/BAAI/bge-small-en-v1.5/embed`.
 */

const Text = TextItem.shape.text;

/** TEI refuses an empty input ("`inputs` cannot be empty"): nothing to embed or tokenize. */
export const NonEmptyText = Text.min(1, 'must not be empty');

/** `inputs`: one text or a batch of them, each non-empty, as TEI's /embed, /embed_sparse and /tokenize take. */
export const TeiInputs = z.union([NonEmptyText, z.array(NonEmptyText).min(1, 'must not be empty').max(DEFAULT_LIMITS.maxItemsPerRequest)]);

export const Direction = z.enum(['Left', 'Right', 'left', 'right']).default('Right');

/**
 * TEI declares `truncate`, `prompt_name` and `dimensions` as optional (nullable in its OpenAPI
 * schema), and clients generated from that schema send `null` for unset fields: null means unset.
 */
export const Truncate = z.boolean().nullish().transform((value) => value ?? false);
export const Unset = <T>(value: T | null | undefined): T | undefined => value ?? undefined;
export const PromptName = z.string().max(DEFAULT_LIMITS.maxLabelChars).nullish().transform(Unset);

const ModelPath = z.union([
  z.strictObject({ org: z.string().min(1), name: z.string().min(1) }).transform(({ org, name }) => `${org}/${name}`),
  z.strictObject({ name: z.string().min(1) }).transform(({ name }) => name),
]);

/** Where a route's default model comes from, for the message when none is configured. */
export interface TeiDefault {
  model: string | null;
  /** The route's last path segment: `embed`, `rerank`, `embed_sparse`, `tokenize`, `info`. */
  route: string;
  /** How an operator sets it, e.g. `--embed-model (SHOAL_EMBED_MODEL)`. */
  setting: string;
}

export const EMBED_MODEL_SETTING = '--embed-model (SHOAL_EMBED_MODEL)';
export const RERANK_MODEL_SETTING = '--rerank-model (SHOAL_RERANK_MODEL)';
export const SPARSE_MODEL_SETTING = '--sparse-model (SHOAL_SPARSE_MODEL)';

/** Whether the request came through a model prefix (`/models/<org>/<name>/...`), which names its model. */
export function hasModelPrefix(request: FastifyRequest): boolean {
  const params = request.params;
  return typeof params === 'object' && params !== null && Object.keys(params).length > 0;
}

/** The model of a TEI request: from the route prefix, else the route's configured default. */
export function teiModel(request: FastifyRequest, fallback: TeiDefault): string {
  if (hasModelPrefix(request)) return parseWith(ModelRef, parseWith(ModelPath, request.params, 'model path'), 'model path');
  if (fallback.model === null) {
    throw new ShoalError(
      ErrorCode.MODEL_NOT_FOUND,
      `no default ${fallback.route} model is configured: start the gateway with ${fallback.setting}, or call /models/<org>/<name>/${fallback.route}`,
    );
  }
  return fallback.model;
}

export function refuseLeftTruncation(direction: string): void {
  if (direction.toLowerCase() === 'left') {
    throw new ShoalError(ErrorCode.UNSUPPORTED_OPERATION, 'truncation_direction Left is not supported: inputs are cut at the end (Right)');
  }
}

/** As TEI without `truncate`: an input longer than the model's maximum is refused (413), not cut silently. */
export function refuseTruncated(result: EncodeResult): void {
  const cut = result.items.find((item) => item.truncated === true);
  if (cut !== undefined) {
    throw new ShoalError(ErrorCode.INPUT_TOO_LARGE, `input ${cut.index} is longer than the model's maximum length; shorten it or send "truncate": true`, {
      details: { index: cut.index },
    });
  }
}

/** The texts of `inputs`, a batch of one for a single string. */
export function inputTexts(inputs: string | readonly string[]): string[] {
  return typeof inputs === 'string' ? [inputs] : [...inputs];
}

/** The paths of a TEI route: `/<route>` and the same under both model prefixes. */
export function teiPaths(route: string): readonly string[] {
  return [`/${route}`, `/models/:name/${route}`, `/models/:org/:name/${route}`];
}
