import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { REPO_ROOT } from './shared.js';

/**
 * The README as a newcomer reads it: its commands and code blocks, taken from the file itself so
 * the tests that run them fail when the README and the code drift apart.
 */

export function readme(): string {
  return readFileSync(join(REPO_ROOT, 'README.md'), 'utf8');
}

/** The README line starting with `prefix` (the first one). */
export function readmeLine(prefix: string): string {
  const line = readme().split('\n').find((text) => text.startsWith(prefix));
  if (line === undefined) throw new Error(`README has no line starting with: ${prefix}`);
  return line;
}

/** Splits a shell line into words: plain words and "double-quoted" or 'single-quoted' strings. */
export function shellWords(line: string): string[] {
  const words = line.match(/"[^"]*"|'[^']*'|\S+/g) ?? [];
  return words.map((word) => word.replace(/^"(.*)"$|^'(.*)'$/s, (_all, double?: string, single?: string) => double ?? single ?? ''));
}

/**
 * `SHOAL_MODEL_DIR=test/fixtures/models npx shoal ARGS...` → ARGS (the README line starting with
 * `prefix`, its leading variables and `npx shoal` removed).
 */
export function readmeCommand(prefix: string): string[] {
  return shoalArgs(readmeLine(prefix));
}

/** The arguments of a `[VAR=value ...] npx shoal ARGS... [# comment]` command. */
export function shoalArgs(command: string): string[] {
  return shellWords(command.replace(/\s#.*$/, '').replace(/^(\w+=\S+ )*npx shoal /, ''));
}

/** The fenced code blocks of one language (```ts, ```bash...), in order. */
export function readmeBlocks(language: string): string[] {
  const blocks: string[] = [];
  const pattern = new RegExp('^```' + language + '\\n([\\s\\S]*?)^```$', 'gm');
  for (const match of readme().matchAll(pattern)) blocks.push(match[1] ?? '');
  return blocks;
}
