import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { ErrorCode, ShoalError } from '../../../adapters/protocol/errors.js';
import { checkRemoteModelName } from '../../../adapters/protocol/model-names.js';
import { parseWith } from '../../../adapters/protocol/validate.js';
import type { ModelCard, RouteContext } from '../context.js';

/**
 * GET /v1/models in the OpenAI list shape (`{object: 'list', data: [{id, object: 'model', ...}]}`),
 * so OpenAI clients' `models.list()` works, with Shoal's facts (family, primitives, resident) added;
 * GET /v1/models/{id} is one entry of that list (`models.retrieve(id)`), 404 MODEL_NOT_FOUND for
 * an id not in it. Ids hold slashes (`BAAI/bge-small-en-v1.5`): the route takes the rest of the
 * path, raw or with the slash %-encoded (`BAAI%2Fbge-small-en-v1.5`).
 */

/** Longest id looked up: ModelRef's limit. */
const MAX_MODEL_ID_CHARS = 1024;

const ModelIdPath = z.object({ '*': z.string() });

function openAiModel(card: ModelCard): ModelCard & { object: 'model'; created: number; owned_by: string } {
  return { ...card, object: 'model', created: 0, owned_by: 'shoal' };
}

export function registerModelRoutes(app: FastifyInstance, context: RouteContext): void {
  app.get('/v1/models', async () => {
    const cards = await context.deps.models();
    return { object: 'list', data: cards.map(openAiModel) };
  });

  app.get('/v1/models/*', async (request) => {
    const id = parseWith(ModelIdPath, request.params, 'model path')['*'];
    // A path-like id (`../../etc`) is refused as everywhere else a model is named (422), not looked up.
    if (id.length > 0 && id.length <= MAX_MODEL_ID_CHARS) checkRemoteModelName(id);
    const card = id.length > 0 && id.length <= MAX_MODEL_ID_CHARS ? (await context.deps.models()).find((entry) => entry.id === id) : undefined;
    if (card === undefined) {
      const shown = id.length <= 200 ? id : `${id.slice(0, 200)}…`;
      throw new ShoalError(ErrorCode.MODEL_NOT_FOUND, `the model '${shown}' does not exist on this gateway (GET /v1/models lists them)`, {
        details: { model: shown },
      });
    }
    return openAiModel(card);
  });
}
