import { isMainThread } from 'node:worker_threads';

/**
 * The process environment onnxruntime must see before its first session. onnxruntime 1.30's
 * telemetry, set up when the first session of the process creates ORT's environment, reads
 * /proc/self/cmdline and walks it recursively: a long command-line argument (`shoal search` with a
 * pasted page of text, about 20,000 characters) overflows the 4 MiB stack of the model thread and
 * the whole process dies with a segmentation fault. `ORT_DISABLE_TELEMETRY=1` skips that set-up
 * (nothing else changes; it also keeps ORT from reading the machine id). A value the user set
 * is kept.
 *
 * onnxruntime reads the variable with getenv(), so it must be in the real process environment:
 * only the main thread's `process.env` writes through to it (a worker's is a copy). The
 * composition root (services/cli/main.ts, which every `shoal` command and container runs) passes
 * it before any thread starts; adapters read and write no environment themselves.
 */
export function prepareOrtEnvironment(env: NodeJS.ProcessEnv): void {
  if (!isMainThread) return;
  env.ORT_DISABLE_TELEMETRY ??= '1';
}
