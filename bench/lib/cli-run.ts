import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';

/**
 * The `shoal` command as a user runs it after `npm install` / `npm run build`: bin/shoal.js on the
 * compiled dist/, never the TypeScript sources through tsx (which compiles every module again in
 * the main thread and in each model thread: seconds of start-up that no installed CLI pays).
 * A dist/ older than its sources would time code that is not the code under test, so it is
 * refused unless the caller builds first.
 */

export const REPO = join(import.meta.dirname, '..', '..');
const BIN = join(REPO, 'bin', 'shoal.js');
/** The folders tsconfig.build.json compiles. */
const SOURCE_ROOTS = ['adapters', 'pipelines', 'services'];

function sourcesUnder(dir: string): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) out.push(...sourcesUnder(path));
    else if (entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts')) out.push(path);
  }
  return out;
}

/** Sources whose compiled file is missing or older than they are (empty: dist/ is current). */
export function staleDist(): string[] {
  const stale: string[] = [];
  for (const root of SOURCE_ROOTS) {
    for (const source of sourcesUnder(join(REPO, root))) {
      const rel = relative(REPO, source);
      const compiled = join(REPO, 'dist', rel.replace(/\.ts$/, '.js'));
      if (!existsSync(compiled) || statSync(compiled).mtimeMs < statSync(source).mtimeMs) stale.push(rel);
    }
  }
  return stale;
}

/** `npm run build` (native addon + tsc), then the freshness check; throws with the reason otherwise. */
export function ensureBuiltCli(build: boolean): void {
  if (build) {
    const started = performance.now();
    const result = spawnSync('npm', ['run', 'build'], { cwd: REPO, stdio: ['ignore', 'inherit', 'inherit'] });
    if (result.status !== 0) throw new Error(`npm run build failed (exit ${result.status ?? result.signal}); the CLI cannot be timed on a built dist/`);
    console.log(`built dist/ in ${((performance.now() - started) / 1000).toFixed(1)} s`);
  }
  const stale = staleDist();
  if (stale.length > 0) {
    const shown = stale.slice(0, 5).join(', ') + (stale.length > 5 ? ` and ${stale.length - 5} more` : '');
    throw new Error(
      `dist/ is older than its sources (${shown}): run \`npm run build\` first, or pass --build; ` +
        'the CLI is timed as installed (compiled), not from the sources through tsx (--cli-from-source times that instead)',
    );
  }
}

/** One whole `shoal` process, from spawn to exit, with the moments its output began and ended. */
export interface CliTiming {
  /** Spawn to exit. */
  seconds: number;
  /** Spawn to the first byte on stdout (start-up, model load and the first chunk's batches). */
  firstOutputSeconds: number | null;
  /** Spawn to the last byte on stdout (what follows is closing the engine and exiting). */
  lastOutputSeconds: number | null;
  outputBytes: number;
  /** Lines written to stdout (one per input line for `shoal encode`). */
  outputLines: number;
}

export interface CliRunOptions {
  /** Run the TypeScript sources through tsx (SHOAL_FROM_SOURCE=1) instead of dist/. */
  fromSource?: boolean;
  env?: NodeJS.ProcessEnv;
  /** Another checkout's bin/shoal.js (built), to time two versions side by side; default this one's. */
  bin?: string;
}

/** Runs `shoal ARGS`, stdout read (and counted) through a pipe as a consumer would, stderr passed through. */
export function runShoal(args: readonly string[], options: CliRunOptions = {}): Promise<CliTiming> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const env: NodeJS.ProcessEnv = { ...process.env, ...options.env };
    if (options.fromSource === true) env.SHOAL_FROM_SOURCE = '1';
    else delete env.SHOAL_FROM_SOURCE;
    const child = spawn(process.execPath, [options.bin ?? BIN, ...args], { stdio: ['ignore', 'pipe', 'inherit'], env });
    let first: number | null = null;
    let last: number | null = null;
    let bytes = 0;
    let lines = 0;
    child.stdout.on('data', (chunk: Buffer) => {
      const now = performance.now();
      first ??= now;
      last = now;
      bytes += chunk.length;
      for (let at = chunk.indexOf(10); at !== -1; at = chunk.indexOf(10, at + 1)) lines += 1;
    });
    child.on('error', reject);
    child.on('close', (code) => {
      const end = performance.now();
      if (code !== 0) {
        reject(new Error(`shoal ${args.slice(0, 1).join(' ')} exited ${code}`));
        return;
      }
      const since = (at: number | null): number | null => (at === null ? null : (at - started) / 1000);
      resolve({ seconds: (end - started) / 1000, firstOutputSeconds: since(first), lastOutputSeconds: since(last), outputBytes: bytes, outputLines: lines });
    });
  });
}

/**
 * `timing` of a run that had to write one line per input text, or an error: a line lost or doubled
 * makes any rate computed from the run meaningless, so such a run is refused, not reported.
 */
export function checkedLineCount(timing: CliTiming, expected: number, what: string): CliTiming {
  if (timing.outputLines !== expected) throw new Error(`${what} wrote ${timing.outputLines} lines for ${expected} inputs: refused`);
  return timing;
}

/** The steady-state rate of two runs of the same command on N and K·N inputs: start-up, load and exit cancel out. */
export function steadyTokensPerSecond(short: { tokens: number; seconds: number }, long: { tokens: number; seconds: number }): number {
  if (!(long.tokens > short.tokens) || !(long.seconds > short.seconds)) return Number.NaN;
  return (long.tokens - short.tokens) / (long.seconds - short.seconds);
}
