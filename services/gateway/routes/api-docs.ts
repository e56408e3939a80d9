import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { ErrorCode, ShoalError } from '../../../adapters/protocol/errors.js';
import type { RouteContext } from '../context.js';
import { buildOpenApiDocument } from '../openapi/document.js';

/**
 * GET /openapi.json (the OpenAPI 3.1 document, openapi/document.ts) and GET /docs (Swagger UI,
 * served from the swagger-ui-dist package: no CDN, works offline). Both are open even when the
 * gateway has tokens, like the probes: the document is built from the code and shows nothing of
 * the deployment (no index names, paths or tokens), and the page's "Authorize" button takes the
 * token for the calls tried from it, which then go through authentication as any other call.
 */

/** The only files /docs/:asset serves, by name: nothing else of the package (or the disk) is reachable. */
const ASSETS: Readonly<Record<string, string>> = Object.freeze({
  'swagger-ui.css': 'text/css; charset=utf-8',
  'swagger-ui-bundle.js': 'text/javascript; charset=utf-8',
  'favicon-32x32.png': 'image/png',
});

/** The page: Swagger UI pointed at this gateway's document; no inline script, so a strict CSP can serve it. */
const PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Shoal gateway API</title>
<link rel="stylesheet" href="/docs/swagger-ui.css">
<link rel="icon" type="image/png" href="/docs/favicon-32x32.png">
</head>
<body>
<div id="swagger-ui"></div>
<script src="/docs/swagger-ui-bundle.js"></script>
<script src="/docs/docs-init.js"></script>
</body>
</html>
`;

const INIT = `window.ui = SwaggerUIBundle({ url: '/openapi.json', dom_id: '#swagger-ui', deepLinking: true, persistAuthorization: false });\n`;

function swaggerUiDir(): string {
  const require = createRequire(import.meta.url);
  return dirname(require.resolve('swagger-ui-dist/package.json'));
}

export function registerApiDocsRoutes(app: FastifyInstance, context: RouteContext): void {
  const document = JSON.stringify(buildOpenApiDocument({ authEnabled: context.settings.apiTokens.length > 0, protectMetrics: context.settings.protectMetrics }));
  const dir = swaggerUiDir();
  // Read once, on first use: most gateways never serve /docs.
  const cache = new Map<string, Promise<Buffer>>();

  app.get('/openapi.json', async (_request, reply) => reply.type('application/json; charset=utf-8').send(document));
  app.get('/docs', async (_request, reply) => reply.type('text/html; charset=utf-8').send(PAGE));
  app.get('/docs/:asset', async (request, reply) => {
    const params = request.params;
    const asset = typeof params === 'object' && params !== null && 'asset' in params && typeof params.asset === 'string' ? params.asset : '';
    if (asset === 'docs-init.js') return reply.type('text/javascript; charset=utf-8').send(INIT);
    const type = Object.hasOwn(ASSETS, asset) ? ASSETS[asset] : undefined;
    if (type === undefined) throw new ShoalError(ErrorCode.NOT_FOUND, `no file /docs/${asset.slice(0, 100)}`);
    let bytes = cache.get(asset);
    if (bytes === undefined) {
      bytes = readFile(join(dir, asset));
      cache.set(asset, bytes);
    }
    return reply.type(type).header('cache-control', 'public, max-age=3600').send(await bytes);
  });
}
