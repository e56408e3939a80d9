import { existsSync, readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { REPO_ROOT } from './shared.js';

/**
 * Which code the `shoal` child processes of the tests run: the compiled dist/ when it is current,
 * the TypeScript sources (through tsx) otherwise. dist/ starts several times faster — tsx compiles
 * every module of the CLI and of each of its worker threads on every start — and it is what users
 * run; the sources keep a developer who edited a file and did not rebuild from testing stale code.
 * dist/ is current when every source file under adapters/, pipelines/ and services/ has its
 * compiled file, no older than the source. SHOAL_TEST_FROM_SOURCE=1 forces the sources.
 *
 * Use as the child's environment variable: `{ SHOAL_FROM_SOURCE: CLI_FROM_SOURCE }`.
 */

const SOURCE_FOLDERS = ['adapters', 'pipelines', 'services'];

function* typeScriptFiles(folder: string): Generator<string> {
  for (const entry of readdirSync(folder, { withFileTypes: true })) {
    const path = join(folder, entry.name);
    if (entry.isDirectory()) yield* typeScriptFiles(path);
    else if (entry.isFile() && entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts')) yield path;
  }
}

/** The first source file whose compiled file is missing or older, or null when dist/ is current. */
export function staleSource(root: string = REPO_ROOT): string | null {
  for (const folder of SOURCE_FOLDERS) {
    for (const source of typeScriptFiles(join(root, folder))) {
      const compiled = join(root, 'dist', relative(root, source)).replace(/\.ts$/, '.js');
      if (!existsSync(compiled) || statSync(compiled).mtimeMs < statSync(source).mtimeMs) return relative(root, source);
    }
  }
  return null;
}

function fromSource(): '0' | '1' {
  if (process.env.SHOAL_TEST_FROM_SOURCE === '1') return '1';
  return staleSource() === null ? '0' : '1';
}

/** '0': the children run dist/; '1': they run the sources. Decided once per test process. */
export const CLI_FROM_SOURCE: '0' | '1' = fromSource();
