import { spawn } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { z } from 'zod';
import { REPO_ROOT } from './shared.js';
import { CLI_FROM_SOURCE } from './cli-build.js';

/**
 * Runs the real `shoal` executable (node bin/shoal.js) as a child process, from a working
 * directory outside the repository, and collects its exit code and output.
 */

export const SHOAL_BIN = join(REPO_ROOT, 'bin', 'shoal.js');

export interface ShoalRun {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

export interface ShoalRunOptions {
  stdin?: string;
  env?: Record<string, string>;
  cwd?: string;
  /** Aborting stops the command (SIGTERM): a test that sees its premise fail need not wait it out. */
  signal?: AbortSignal;
}

export function runShoal(args: readonly string[], options: ShoalRunOptions = {}): Promise<ShoalRun> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [SHOAL_BIN, ...args], {
      cwd: options.cwd ?? tmpdir(),
      // dist/ when it is current, else the sources (cli-build.ts); a small thread pool on the shared 2-core machine.
      env: { ...process.env, SHOAL_FROM_SOURCE: CLI_FROM_SOURCE, SHOAL_THREADS: '1', ...options.env },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (chunk: Buffer) => out.push(chunk));
    child.stderr.on('data', (chunk: Buffer) => err.push(chunk));
    child.on('error', reject);
    const stop = (): void => void child.kill('SIGTERM');
    if (options.signal?.aborted === true) stop();
    options.signal?.addEventListener('abort', stop, { once: true });
    child.on('close', (code, signal) => {
      options.signal?.removeEventListener('abort', stop);
      resolve({ code, signal, stdout: Buffer.concat(out).toString('utf8'), stderr: Buffer.concat(err).toString('utf8') });
    });
    // The CLI may exit before reading all of stdin (an early error): that is not a test failure.
    child.stdin.on('error', () => undefined);
    child.stdin.end(options.stdin ?? '');
  });
}

/** JSON Lines text from objects. */
export function jsonl(lines: readonly unknown[]): string {
  return lines.map((line) => `${JSON.stringify(line)}\n`).join('');
}

/** Parses every non-empty output line as JSON and checks it with `schema`. */
export function parseJsonl<S extends z.ZodType>(text: string, schema: S): z.output<S>[] {
  return text
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => schema.parse(JSON.parse(line)));
}

/** Output lines by id, failing on duplicates (ids are unique in every test input). */
export function byId<T extends { id: string | number }>(lines: readonly T[]): Map<string | number, T> {
  const map = new Map<string | number, T>();
  for (const line of lines) {
    if (map.has(line.id)) throw new Error(`duplicate id ${String(line.id)} in CLI output`);
    map.set(line.id, line);
  }
  return map;
}

/** A SPLADE vector as a dense array of `size` floats. */
export function sparseToDense(sparse: { indices: readonly number[]; values: readonly number[] }, size: number): number[] {
  const out = new Array<number>(size).fill(0);
  sparse.indices.forEach((index, k) => {
    out[index] = sparse.values[k] ?? Number.NaN;
  });
  return out;
}
