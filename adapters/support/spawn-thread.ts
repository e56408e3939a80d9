import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Worker, type WorkerOptions } from 'node:worker_threads';

/**
 * Starts a worker thread on a module of this code base. Under the TypeScript sources (tests,
 * `tsx`), the thread first registers tsx's loader so the `.ts` entry and its imports resolve;
 * from the compiled `dist/`, the `.js` entry is started directly.
 */
export function spawnThread(entry: URL, options: WorkerOptions = {}): Worker {
  if (!entry.pathname.endsWith('.ts')) return new Worker(entry, options);
  // The ESM entry of tsx's API (require.resolve would give the CommonJS one).
  const require = createRequire(import.meta.url);
  const tsxRoot = dirname(require.resolve('tsx/package.json'));
  const tsxApi = pathToFileURL(join(tsxRoot, 'dist', 'esm', 'api', 'index.mjs')).href;
  const bootstrap =
    `import { register } from ${JSON.stringify(tsxApi)};\n` +
    `register();\n` +
    `await import(${JSON.stringify(entry.href)});\n`;
  return new Worker(new URL(`data:text/javascript,${encodeURIComponent(bootstrap)}`), options);
}

/** The sibling module `name` of `base` with the extension the running code uses (.ts or .js). */
export function siblingModule(base: string, name: string): URL {
  const ext = base.endsWith('.ts') ? '.ts' : '.js';
  return new URL(`./${name}${ext}`, base);
}
