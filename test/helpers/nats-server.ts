import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { waitForOutput } from './child-process.js';
import { restartableChild, type Restartable } from './restartable.js';

/**
 * A private nats-server with JetStream for one test file: free ports, a temporary store folder,
 * stopped (and its folder removed) by `stop()`. `restart()` stops it and starts it again on the
 * same ports and store, as a broker restart in production would. Readiness is the server's own
 * "Server is ready" line, not a sleep.
 */

export const NATS_SERVER_BIN = process.env.SHOAL_NATS_SERVER ?? '/usr/sbin/nats-server';

export function natsServerAvailable(): boolean {
  return existsSync(NATS_SERVER_BIN);
}

export const NATS_SERVER_MISSING = `skipped: ${NATS_SERVER_BIN} not found (apt-get install nats-server, or set SHOAL_NATS_SERVER)`;

/**
 * `count` distinct free ports on 127.0.0.1: every listener is held open until all have their
 * port, then closed. Two `freePort()` calls in a row can return the same port (the first is
 * released before the second is asked for, and the kernel may hand it out again): a nats-server
 * given it as both client and monitor port failed to start in CI ("address already in use").
 */
export async function freePorts(count: number): Promise<number[]> {
  const servers = Array.from({ length: count }, () => createServer());
  try {
    return await Promise.all(
      servers.map(
        (server) =>
          new Promise<number>((resolve, reject) => {
            server.unref();
            server.on('error', reject);
            server.listen(0, '127.0.0.1', () => {
              const address = server.address();
              resolve(typeof address === 'object' && address !== null ? address.port : 0);
            });
          }),
      ),
    );
  } finally {
    await Promise.all(servers.map((server) => new Promise<void>((resolve) => (server.listening ? server.close(() => resolve()) : resolve()))));
  }
}

export async function freePort(): Promise<number> {
  const [port] = await freePorts(1);
  if (port === undefined) throw new Error('no free port');
  return port;
}

/** restart(): SIGTERM, wait for the exit, start again on the same ports and store; stop() removes the store. */
export interface NatsServerHandle extends Restartable {
  readonly url: string;
  readonly port: number;
  readonly monitorPort: number;
  readonly storeDir: string;
  /** Process id of the running server (null while stopped), for CPU accounting in benches. */
  pid(): number | null;
}

export interface NatsServerOptions {
  /**
   * The JetStream file store limit, as the server's config file writes it (`10GB`, `64MB`); unset:
   * the server's default (75 % of the free disk, up to 1 TB).
   */
  maxFileStore?: string;
  /** More of the server's config file (accounts with JetStream limits...), after the jetstream block. */
  extraConfig?: string;
}

/** First starts tried: a port another process binds between freePorts() and the server's own bind is met with fresh ports. */
const START_ATTEMPTS = 3;

export async function startNatsServer(options: NatsServerOptions = {}): Promise<NatsServerHandle> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await startOnFreePorts(options);
    } catch (error) {
      if (attempt >= START_ATTEMPTS || !String(error).includes('address already in use')) throw error;
    }
  }
}

async function startOnFreePorts(options: NatsServerOptions): Promise<NatsServerHandle> {
  const [port = 0, monitorPort = 0] = await freePorts(2);
  const storeDir = mkdtempSync(join(tmpdir(), 'shoal-nats-'));
  const args = ['-js', '-a', '127.0.0.1', '-p', String(port), '-m', String(monitorPort), '-sd', storeDir];
  if (options.maxFileStore !== undefined || options.extraConfig !== undefined) {
    // The store limit has no flag: a config file beside the store holds it (the flags still win for the rest).
    const config = join(storeDir, 'limits.conf');
    const jetstream = options.maxFileStore === undefined ? '' : `jetstream {\n  max_file_store: ${options.maxFileStore}\n}\n`;
    writeFileSync(config, `${jetstream}${options.extraConfig ?? ''}\n`);
    args.push('-c', config);
  }
  const server = restartableChild({
    launch: () => spawn(NATS_SERVER_BIN, args, { stdio: ['ignore', 'ignore', 'pipe'] }),
    ready: (child) => waitForOutput(child, 'Server is ready', 'stderr', `nats-server on port ${port}`),
    remove: () => rmSync(storeDir, { recursive: true, force: true }),
  });
  try {
    await server.lifecycle.start();
  } catch (error) {
    rmSync(storeDir, { recursive: true, force: true });
    throw error;
  }
  return {
    url: `nats://127.0.0.1:${port}`,
    port,
    monitorPort,
    storeDir,
    pid: () => server.current()?.pid ?? null,
    ...server.lifecycle,
  };
}

/**
 * Re-runs `check` until it stops throwing, for state another process settles a moment after the
 * event a test waits on (a term() sent just after the dead letter it follows). Polls every 20 ms;
 * the last failure is thrown after `timeoutMs`.
 */
export async function eventually(check: () => Promise<void>, timeoutMs = 10_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    try {
      await check();
      return;
    } catch (error) {
      if (Date.now() > until) throw error;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }
}
