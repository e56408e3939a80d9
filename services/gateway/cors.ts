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

/** Every method a route uses (DELETE: `DELETE /v1/indexes/:name/documents`). */
const ALLOWED_METHODS = 'GET, POST, DELETE, OPTIONS';
const ALLOWED_HEADERS = ['authorization', 'content-type'];
/** `Access-Control-Request-Headers`: header names (RFC 9110 tokens), comma-separated; bounded. */
const REQUESTED_HEADERS = /^[!#$%&'*+.^_`|~0-9a-z-]+(?:[ \t]*,[ \t]*[!#$%&'*+.^_`|~0-9a-z-]+)*$/i;
const MAX_REQUESTED_HEADERS_CHARS = 2_048;
const EXPOSED_HEADERS = 'retry-after, location, x-request-id';
const PREFLIGHT_MAX_AGE_S = '600';

/**
 * The headers a preflight may allow: the two every call needs, plus those the browser asks for.
 * Clients send more than those two (the `openai` SDK adds `X-Stainless-*` to every call, others
 * `X-Request-Id`), and a browser drops the real request when one is missing from the answer. Which
 * headers a caller sends is no security boundary here (no cookies: credentials are not allowed;
 * the bearer token is checked on the real request), so any well-formed list is echoed.
 */
function allowedHeaders(requested: string | undefined): string {
  const names = [...ALLOWED_HEADERS];
  const list = requested?.trim() ?? '';
  if (list.length <= MAX_REQUESTED_HEADERS_CHARS && REQUESTED_HEADERS.test(list)) {
    for (const name of list.split(',')) {
      const lower = name.trim().toLowerCase();
      if (!names.includes(lower)) names.push(lower);
    }
  }
  return names.join(', ');
}

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
  app.options('/*', async (request, reply) => {
    const requested = request.headers['access-control-request-headers'];
    reply.header('access-control-allow-methods', ALLOWED_METHODS);
    reply.header('access-control-allow-headers', allowedHeaders(Array.isArray(requested) ? requested.join(',') : requested));
    // The answer depends on the asked-for headers: caches must not reuse it for another list.
    reply.header('vary', any ? 'Access-Control-Request-Headers' : 'Origin, Access-Control-Request-Headers');
    reply.header('access-control-max-age', PREFLIGHT_MAX_AGE_S);
    return reply.code(204).send();
  });
}
