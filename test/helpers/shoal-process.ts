import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { tmpdir } from 'node:os';
import { SHOAL_BIN } from './shoal-cli.js';
import { CLI_FROM_SOURCE } from './cli-build.js';

/**
 * A long-running `shoal` child process (worker, gateway, dev, a slow encode) whose output a test
 * watches while it runs: wait for a line, send a signal, time the exit. Output of stdout and
 * stderr is kept together, in arrival order.
 */

export interface ShoalProcess {
  readonly child: ChildProcessWithoutNullStreams;
  /** stdout and stderr so far. */
  output(): string;
  /** Resolves once the output matches `pattern`; rejects after `timeoutMs` or when the process exits first. */
  waitFor(pattern: RegExp, timeoutMs?: number): Promise<void>;
  /** Resolves with the exit code (or signal) once the process has exited. */
  exited(): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Sends `signal` and measures how long the exit takes, in ms. */
  stop(signal?: NodeJS.Signals): Promise<{ code: number | null; signal: NodeJS.Signals | null; ms: number }>;
}

export function startShoal(
  args: readonly string[],
  /** command: what runs `args` (default node bin/shoal.js); detached: its own process group, as a terminal's job. */
  options: { env?: Record<string, string>; cwd?: string; command?: readonly string[]; detached?: boolean } = {},
): ShoalProcess {
  const command = options.command ?? [process.execPath, SHOAL_BIN];
  const [file, ...head] = command;
  if (file === undefined) throw new Error('startShoal: empty command');
  const child = spawn(file, [...head, ...args], {
    cwd: options.cwd ?? tmpdir(),
    env: { ...process.env, SHOAL_FROM_SOURCE: CLI_FROM_SOURCE, SHOAL_THREADS: '1', ...options.env },
    stdio: ['pipe', 'pipe', 'pipe'],
    detached: options.detached ?? false,
  });
  let text = '';
  const waiters = new Set<() => void>();
  const onData = (chunk: Buffer): void => {
    text += chunk.toString('utf8');
    for (const check of waiters) check();
  };
  child.stdout.on('data', onData);
  child.stderr.on('data', onData);
  child.stdin.on('error', () => undefined);
  const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.once('exit', (code, signal) => {
      resolve({ code, signal });
      for (const check of waiters) check();
    });
  });
  const isDone = (): boolean => child.exitCode !== null || child.signalCode !== null;
  return {
    child,
    output: () => text,
    exited: () => exit,
    waitFor: (pattern, timeoutMs = 20_000) =>
      new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`no output matching ${String(pattern)} within ${timeoutMs} ms; output so far:\n${text.slice(-3000)}`));
        }, timeoutMs);
        function check(): void {
          if (pattern.test(text)) {
            clearTimeout(timer);
            waiters.delete(check);
            resolve();
          } else if (isDone()) {
            clearTimeout(timer);
            waiters.delete(check);
            reject(new Error(`exited before printing ${String(pattern)}; output:\n${text.slice(-3000)}`));
          }
        }
        waiters.add(check);
        check();
      }),
    stop: async (signal = 'SIGTERM') => {
      const started = Date.now();
      child.kill(signal);
      const result = await exit;
      return { ...result, ms: Date.now() - started };
    },
  };
}

/** Whether a process with this pid still runs. */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
