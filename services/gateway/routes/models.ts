import type { FastifyInstance } from 'fastify';
import type { RouteContext } from '../context.js';

/**
 * GET /v1/models in the OpenAI list shape (`{object: 'list', data: [{id, object: 'model', ...}]}`),
 * so OpenAI clients' `models.list()` works, with Shoal's facts (family, primitives, resident) added.
 */

export function registerModelRoutes(app: FastifyInstance, context: RouteContext): void {
  app.get('/v1/models', async () => {
    const cards = await context.deps.models();
    return {
      object: 'list',
      data: cards.map((card) => ({ ...card, object: 'model', created: 0, owned_by: 'shoal' })),
    };
  });
}
