import type { FastifyInstance } from 'fastify';

/**
 * Cross-origin access for browser clients, off unless origins are configured. Only the allowed
 * origins get CORS headers; preflights are answered here (without authentication, as browsers send
 * none on preflight) and every other request keeps its normal handling.
 */

export interface CorsOptions {
  /** Allowed origins (`https://app.example`), or `*` for any; empty = CORS off. */
  origins: readonly string[];
}

const ALLOWED_METHODS = 'GET, POST, OPTIONS';
const ALLOWED_HEADERS = 'authorization, content-type';
const EXPOSED_HEADERS = 'retry-after, location';
const PREFLIGHT_MAX_AGE_S = '600';

export function registerCors(app: FastifyInstance, options: CorsOptions): void {
  if (options.origins.length === 0) return;
  const any = options.origins.includes('*');
  const allowed = new Set(options.origins);
  const allowOrigin = (origin: string | undefined): string | null => {
    if (origin === undefined) return null;
    if (any) return '*';
    return allowed.has(origin) ? origin : null;
  };
  app.addHook('onRequest', async (request, reply) => {
    const origin = allowOrigin(request.headers.origin);
    if (origin === null) return;
    reply.header('access-control-allow-origin', origin);
    reply.header('access-control-expose-headers', EXPOSED_HEADERS);
    if (!any) reply.header('vary', 'Origin');
  });
  app.options('/*', async (_request, reply) => {
    reply.header('access-control-allow-methods', ALLOWED_METHODS);
    reply.header('access-control-allow-headers', ALLOWED_HEADERS);
    reply.header('access-control-max-age', PREFLIGHT_MAX_AGE_S);
    return reply.code(204).send();
  });
}
