import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance } from 'fastify';
import { ErrorCode, ShoalError } from '../../../adapters/protocol/errors.js';
import { CONSOLE_PAGE } from '../console/page.js';
import { CONSOLE_CSS } from '../console/styles.js';
import type { RouteContext } from '../context.js';

/**
 * GET /ui: the web console (docs/console.md). The page and its style sheet are modules of the
 * gateway (console/page.ts, console/styles.ts); its script modules are console/browser/*.ts,
 * compiled for the browser by the build like every other source file (native ES modules, no
 * bundler) and served from beside this file: dist/…/console/browser/*.js. Run from the sources
 * (tsx, the tests, `shoal dev` without a build) there is no .js yet: each module is transpiled
 * once with TypeScript, which a source checkout has. Open like /docs: the files hold no data, and
 * the page sends the token it asks for with every call it makes.
 */

/** The script modules the page may load, by name: nothing else of the package (or the disk) is reachable. */
export const CONSOLE_MODULES: readonly string[] = Object.freeze(['main', 'api', 'dom', 'format', 'highlight', 'progress', 'prometheus', 'schema', 'search', 'runs', 'models', 'upload']);

/** No inline script or style anywhere in the console; calls only to this gateway. */
const CONTENT_SECURITY_POLICY = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

const BROWSER_DIR = new URL('../console/browser/', import.meta.url);

/** A module's JavaScript: the compiled file when there is one, else its source transpiled (a source checkout). */
async function moduleScript(name: string): Promise<string> {
  const compiled = fileURLToPath(new URL(`${name}.js`, BROWSER_DIR));
  if (existsSync(compiled)) return readFile(compiled, 'utf8');
  const source = await readFile(fileURLToPath(new URL(`${name}.ts`, BROWSER_DIR)), 'utf8');
  const ts = await import('typescript').catch((cause: unknown) => {
    throw new ShoalError(ErrorCode.INTERNAL, `the console's scripts are not built (run npm run build) and TypeScript is not installed to compile ${name}.ts`, { cause });
  });
  const { ScriptTarget, ModuleKind } = ts.default;
  return ts.default.transpileModule(source, { compilerOptions: { target: ScriptTarget.ES2022, module: ModuleKind.ESNext, verbatimModuleSyntax: true }, fileName: `${name}.ts` }).outputText;
}

export function registerConsoleRoutes(app: FastifyInstance, _context: RouteContext): void {
  // Read (or compiled) once, on first use: most gateways never serve the console.
  const scripts = new Map<string, Promise<string>>();
  app.get('/ui', async (_request, reply) => reply.type('text/html; charset=utf-8').header('content-security-policy', CONTENT_SECURITY_POLICY).header('cache-control', 'no-cache').send(CONSOLE_PAGE));
  app.get('/ui/:asset', async (request, reply) => {
    const params = request.params;
    const asset = typeof params === 'object' && params !== null && 'asset' in params && typeof params.asset === 'string' ? params.asset : '';
    if (asset === 'console.css') return reply.type('text/css; charset=utf-8').header('cache-control', 'no-cache').send(CONSOLE_CSS);
    const name = asset.endsWith('.js') ? asset.slice(0, -3) : '';
    if (!CONSOLE_MODULES.includes(name)) throw new ShoalError(ErrorCode.NOT_FOUND, `no file /ui/${asset.slice(0, 100)}`);
    let script = scripts.get(name);
    if (script === undefined) {
      script = moduleScript(name);
      // A failed read is not kept: the next request tries again.
      script.catch(() => scripts.delete(name));
      scripts.set(name, script);
    }
    return reply.type('text/javascript; charset=utf-8').header('cache-control', 'no-cache').send(await script);
  });
}
