#!/usr/bin/env node
// The `shoal` command. Runs the compiled CLI (dist/services/cli/main.js) when it has been built,
// otherwise the TypeScript sources through tsx; works from any working directory.
//
// The native memory onnxruntime frees when a model is unloaded stays in glibc's arenas unless it is
// handed back: Shoal calls malloc_trim after every unload through the addon in native/ (built by
// `npm install` / `npm run build`). Without the addon (no C compiler at install time, or
// SHOAL_NATIVE_TRIM=0), the fallback is MALLOC_TRIM_THRESHOLD_=0 (PLATFORM.md: 262 MB -> 87 MB),
// which glibc reads only when a process starts and which costs about 20 % of inference
// throughput: this script then starts itself once more with it set and passes the exit status (or
// the signal) through. SHOAL_FROM_SOURCE=1 runs the sources even when dist/ exists (tests,
// development).
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'];

function reexecWithMallocTrim() {
  const child = spawn(process.execPath, [...process.execArgv, fileURLToPath(import.meta.url), ...process.argv.slice(2)], {
    stdio: 'inherit',
    env: { ...process.env, MALLOC_TRIM_THRESHOLD_: '0', SHOAL_PARENT_PID: String(process.pid) },
  });
  // A terminal's Ctrl-C reaches the whole process group (child included); the CLI treats a
  // repeat within a second as the same interrupt, so forwarding is safe and covers `kill <pid>`.
  for (const signal of SIGNALS) process.on(signal, () => child.kill(signal));
  child.on('error', (error) => {
    process.stderr.write(`error [INTERNAL]: cannot start ${process.execPath}: ${error.message}\n`);
    process.exit(1);
  });
  child.on('exit', (code, signal) => {
    if (signal !== null) {
      for (const name of SIGNALS) process.removeAllListeners(name);
      process.kill(process.pid, signal);
      return;
    }
    process.exit(code ?? 1);
  });
}

// Commands that run a model in this process: their model and prep threads are started before the
// CLI's own modules load, so that the threads' imports overlap the main thread's
// (adapters/model-threads/early-threads.ts). A word matched elsewhere on the line only starts
// two threads that end with the process.
const MODEL_COMMANDS = new Set(['encode', 'score', 'extract', 'tokenize', 'classify', 'ingest', 'search']);

function runsModel() {
  const words = process.argv.slice(2);
  return !words.includes('--help') && !words.includes('-h') && words.some((word) => MODEL_COMMANDS.has(word));
}

async function start() {
  const root = new URL('../', import.meta.url);
  const compiled = new URL('dist/services/cli/main.js', root);
  if (process.env.SHOAL_FROM_SOURCE !== '1' && existsSync(fileURLToPath(compiled))) {
    if (runsModel()) (await import(new URL('dist/adapters/model-threads/early-threads.js', root).href)).startEarlyThreads();
    await import(compiled.href);
    return;
  }
  // The project's tsconfig, whatever the working directory; worker threads inherit the variable.
  process.env.TSX_TSCONFIG_PATH ??= fileURLToPath(new URL('tsconfig.json', root));
  const { register } = await import('tsx/esm/api');
  register();
  if (runsModel()) (await import(new URL('adapters/model-threads/early-threads.ts', root).href)).startEarlyThreads();
  await import(new URL('services/cli/main.ts', root).href);
}

// A child started by reexecWithMallocTrim must not outlive its parent: if the parent is killed
// outright (SIGKILL, OOM killer), the child is re-parented; it then stops as on SIGTERM (drain).
// The same under npm (`npx shoal dev &` then `kill $!`): npm forwards the SIGTERM to the `sh -c`
// it runs the bin through, and sh dies without passing it on; npm sets npm_command in its
// children's environment, and a shoal started through it stops when its parent goes away.
function watchParent() {
  const explicit = Number(process.env.SHOAL_PARENT_PID);
  const underNpm = process.env.npm_command === 'exec' || process.env.npm_command === 'run-script';
  const parent = Number.isInteger(explicit) && explicit > 0 ? explicit : underNpm ? process.ppid : 0;
  if (parent <= 1) return;
  const timer = setInterval(() => {
    if (process.ppid !== parent) {
      clearInterval(timer);
      // SIGHUP, not SIGTERM: the CLI stops on it as on SIGTERM unless it is already stopping (a
      // Ctrl-C reaches npm, sh and shoal together; the parents' exit must not cut the drain short).
      process.kill(process.pid, 'SIGHUP');
    }
  }, 1000);
  timer.unref();
}

function needsTrimThreshold() {
  if (process.platform !== 'linux' || process.env.MALLOC_TRIM_THRESHOLD_ !== undefined) return false;
  if (process.env.SHOAL_NATIVE_TRIM === '0') return true;
  return !existsSync(fileURLToPath(new URL('../native/build/malloc-trim.node', import.meta.url)));
}

if (needsTrimThreshold()) {
  watchParent();
  reexecWithMallocTrim();
} else {
  watchParent();
  await start();
}
