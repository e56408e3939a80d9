import type { ShoalSettings } from '../settings/shoal-settings.js';
import { spawn, type ChildProcess } from 'node:child_process';
import { constants } from 'node:fs';
import { access, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { ErrorCode, ShoalError } from '../../adapters/protocol/errors.js';

/**
 * A private nats-server for `shoal dev`: JetStream on, bound to 127.0.0.1 on a port the server
 * picks (`-p -1`), its store in a fresh temporary folder. It runs in its own process group so a
 * terminal's Ctrl-C reaches only Shoal, which stops the server itself after draining the gateway
 * and the worker; close() then removes the store. The URL is read from the server's own log line.
 *
 * The server is started by a small POSIX shell guard (WATCHDOG) whose standard input is a pipe
 * from Shoal. Linux lets no Node program ask for a signal when its parent dies, and a Shoal
 * killed with SIGKILL runs no exit handler; but the kernel closes the pipe's write end whatever
 * way Shoal ends, so the guard reads end-of-file, stops the server and removes its store.
 */

const SEARCH_EXTRA = ['/usr/sbin', '/usr/local/sbin', '/usr/local/bin', '/opt/homebrew/bin'];
/** How long the server may take to say it is ready. */
const START_TIMEOUT_MS = 20_000;
/** How long it may take to exit after SIGTERM before it is killed. */
const STOP_TIMEOUT_MS = 10_000;
const LISTENING = /Listening for client connections on (\S+):(\d+)/;
/** The guard's first line: the pid of the server it started. */
const SERVER_PID = /^shoal-nats-pid (\d+)$/m;

/**
 * Runs `"$@"` (the server and its arguments) in the background; `$1` is the store folder. A
 * SIGTERM to the guard, or end-of-file on its standard input (Shoal closed it or is gone), stops
 * the server with SIGTERM; once the server has exited the guard removes the store and exits.
 */
const WATCHDOG = [
  'store=$1; shift',
  '"$@" </dev/null & server=$!',
  'echo "shoal-nats-pid $server" >&2',
  'stop() { kill -TERM "$server" 2>/dev/null; }',
  'trap stop TERM INT HUP',
  // An asynchronous list's standard input is /dev/null unless redirected: read Shoal's pipe as fd 3.
  'exec 3<&0',
  '{ cat <&3 >/dev/null; stop; } &',
  'watcher=$!',
  'exec 3<&-',
  'while kill -0 "$server" 2>/dev/null; do wait "$server"; done',
  'kill "$watcher" 2>/dev/null',
  'rm -rf "$store"',
].join('\n');
const READY = /Server is ready/;

const INSTALL_HINT =
  'install nats-server (Debian/Ubuntu: sudo apt-get install nats-server; macOS: brew install nats-server; ' +
  'or a release binary from github.com/nats-io/nats-server/releases) or set SHOAL_NATS_SERVER to its path';

async function isExecutable(path: string): Promise<boolean> {
  try {
    await access(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** SHOAL_NATS_SERVER, else `nats-server` on PATH or in the usual sbin/bin folders. */
export async function findNatsServer(settings: ShoalSettings): Promise<string> {
  const explicit = settings.value('natsServer');
  if (explicit !== undefined) {
    if (await isExecutable(explicit)) return explicit;
    throw new ShoalError(ErrorCode.CONFIG_INVALID, `SHOAL_NATS_SERVER=${explicit} is not an executable file; ${INSTALL_HINT}`);
  }
  const folders = [...(settings.variables.PATH ?? '').split(delimiter).filter((dir) => dir !== ''), ...SEARCH_EXTRA];
  for (const folder of folders) {
    const candidate = join(folder, 'nats-server');
    if (await isExecutable(candidate)) return candidate;
  }
  throw new ShoalError(ErrorCode.UNAVAILABLE, `nats-server was not found on PATH or in ${SEARCH_EXTRA.join(', ')}: ${INSTALL_HINT}`);
}

export interface LocalNats {
  url: string;
  pid: number;
  storeDir: string;
  /** Stops the server (SIGTERM, then SIGKILL after a while) and removes its store; idempotent. */
  close(): Promise<void>;
}

function waitForReady(child: ChildProcess, binary: string): Promise<{ url: string; pid: number }> {
  return new Promise((resolve, reject) => {
    let log = '';
    let url: string | null = null;
    let pid = -1;
    const fail = (message: string): void => {
      cleanup();
      reject(new ShoalError(ErrorCode.UNAVAILABLE, `${message}; last output of ${binary}:\n${log.slice(-2000)}`));
    };
    const onData = (chunk: Buffer): void => {
      log += chunk.toString('utf8');
      const listening = LISTENING.exec(log);
      if (listening !== null) url = `nats://${listening[1] ?? '127.0.0.1'}:${listening[2] ?? ''}`;
      const started = SERVER_PID.exec(log);
      if (started !== null) pid = Number(started[1]);
      if (url !== null && READY.test(log)) {
        cleanup();
        resolve({ url, pid });
      }
    };
    const onExit = (code: number | null, signal: NodeJS.Signals | null): void => fail(`nats-server exited during start (code ${code}, signal ${signal})`);
    const onError = (error: Error): void => fail(`cannot run ${binary}: ${error.message}`);
    const timer = setTimeout(() => fail(`nats-server did not become ready within ${START_TIMEOUT_MS} ms`), START_TIMEOUT_MS);
    function cleanup(): void {
      clearTimeout(timer);
      child.stderr?.off('data', onData);
      child.off('exit', onExit);
      child.off('error', onError);
    }
    child.stderr?.on('data', onData);
    child.once('exit', onExit);
    child.once('error', onError);
  });
}

function waitForExit(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => child.once('exit', () => resolve()));
}

export async function startLocalNats(options: { settings: ShoalSettings }): Promise<LocalNats> {
  const binary = await findNatsServer(options.settings);
  const storeDir = await mkdtemp(join(tmpdir(), 'shoal-dev-nats-'));
  const child = spawn('/bin/sh', ['-c', WATCHDOG, 'shoal-nats-guard', storeDir, binary, '-js', '-a', '127.0.0.1', '-p', '-1', '-sd', storeDir], {
    stdio: ['pipe', 'ignore', 'pipe'],
    detached: true,
  });
  // Shoal gone before close() hands its end of the pipe back: nothing to report, the guard acts.
  child.stdin?.on('error', () => undefined);
  // If Shoal itself exits without close() (an uncaught error), the server must not outlive it:
  // the whole group (guard, server, watcher) is killed.
  const killGroup = (): void => {
    try {
      if (child.pid !== undefined) process.kill(-child.pid, 'SIGKILL');
    } catch {
      // Already gone.
    }
  };
  process.once('exit', killGroup);
  let stopping: Promise<void> | null = null;
  const stop = (): Promise<void> => {
    stopping ??= (async () => {
      const exited = waitForExit(child);
      child.stdin?.end();
      child.kill('SIGTERM');
      const timer = setTimeout(killGroup, STOP_TIMEOUT_MS);
      await exited;
      clearTimeout(timer);
      process.off('exit', killGroup);
      await rm(storeDir, { recursive: true, force: true });
    })();
    return stopping;
  };
  try {
    const { url, pid } = await waitForReady(child, binary);
    // Keep reading its log so a full pipe never blocks the server; it is not shown.
    child.stderr?.resume();
    return { url, pid, storeDir, close: stop };
  } catch (error) {
    await stop();
    throw error;
  }
}
