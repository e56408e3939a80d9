import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { freePort, freePorts, NATS_SERVER_BIN, NATS_SERVER_MISSING, natsServerAvailable } from '../helpers/nats-server.js';
import { FIXTURES_DIR } from '../helpers/shared.js';
import { startShoal, type ShoalProcess } from '../helpers/shoal-process.js';

/**
 * Issue 16 item 1, as a user meets it: `shoal worker` and `shoal gateway` started as real
 * processes against a NATS that is not there (closed port), refuses the credentials, or never
 * answers. Each attempt is logged with its reason, the first SIGTERM ends the process within 2 s
 * (even in the middle of an attempt), and the gateway's port answers /healthz 200 and /readyz 503
 * with the reason while NATS is down, then becomes ready once a nats-server starts on that port.
 */

const MODEL_DIR = join(FIXTURES_DIR, 'models');
const WORKER_ARGS = ['worker', '--model-dir', MODEL_DIR, '--models', 'tiny-bert-mean'];

/** Registers a cleanup of the running test (its processes, servers, ports). */
type Defer = (cleanup: () => Promise<void> | void) => void;

function shoal(defer: Defer, args: readonly string[], env: Record<string, string> = {}): ShoalProcess {
  const proc = startShoal(args, { env: { SHOAL_LOG_LEVEL: 'info', ...env } });
  defer(async () => {
    if (proc.child.exitCode === null && proc.child.signalCode === null) await proc.stop('SIGKILL');
  });
  return proc;
}

/** A private nats-server on a given port (the one the processes were already pointed at). */
async function natsOn(defer: Defer, port: number, extra: readonly string[] = []): Promise<void> {
  const store = mkdtempSync(join(tmpdir(), 'shoal-nats-unreachable-'));
  const child: ChildProcess = spawn(NATS_SERVER_BIN, ['-js', '-a', '127.0.0.1', '-p', String(port), '-sd', store, ...extra], { stdio: ['ignore', 'ignore', 'pipe'] });
  await new Promise<void>((resolve, reject) => {
    let log = '';
    child.stderr?.on('data', (chunk: Buffer) => {
      log += chunk.toString('utf8');
      if (log.includes('Server is ready')) resolve();
    });
    child.once('exit', (code) => reject(new Error(`nats-server exited with ${String(code)}: ${log}`)));
  });
  defer(async () => {
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGTERM');
    await exited;
    rmSync(store, { recursive: true, force: true });
  });
}

/** A TCP port that accepts connections and never says a word (a firewall-like black hole). */
async function silentPort(defer: Defer): Promise<number> {
  const sockets = new Set<Socket>();
  const server: Server = createServer((socket) => sockets.add(socket));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  defer(
    () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  );
  const address = server.address();
  return typeof address === 'object' && address !== null ? address.port : 0;
}

async function httpStatus(url: string): Promise<{ status: number; body: string } | null> {
  try {
    const response = await fetch(url);
    return { status: response.status, body: await response.text() };
  } catch {
    return null;
  }
}

async function poll<T>(read: () => Promise<T>, ok: (value: T) => boolean, timeoutMs: number): Promise<T> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (ok(value) || Date.now() > until) return value;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

describe.skipIf(!natsServerAvailable())('a worker or gateway that cannot reach NATS (real processes)', () => {
  if (!natsServerAvailable()) it.skip(NATS_SERVER_MISSING, () => undefined);

  it('a worker at a closed port logs each attempt with "connection refused" and stops on the first SIGTERM', async ({ onTestFinished }) => {
    const defer: Defer = (cleanup) => onTestFinished(cleanup);
    const port = await freePort();
    const worker = shoal(defer, [...WORKER_ARGS, '--nats', `nats://127.0.0.1:${port}`]);
    await worker.waitFor(new RegExp(`connecting to nats://127\\.0\\.0\\.1:${port} \\(attempt 2\\)`), 30_000);
    const out = worker.output();
    expect(out).toContain(`connecting to nats://127.0.0.1:${port} (attempt 1)`);
    expect(out).toMatch(/"attempt":1,"code":"UNAVAILABLE","err":"[^"]*connection refused/);
    const stopped = await worker.stop('SIGTERM');
    expect(stopped.code).toBe(0);
    expect(stopped.ms).toBeLessThan(2_000);
  }, 45_000);

  it('a worker with wrong credentials says the credentials were refused, and stops on SIGINT', async ({ onTestFinished }) => {
    const defer: Defer = (cleanup) => onTestFinished(cleanup);
    const port = await freePort();
    await natsOn(defer, port, ['--user', 'shoal', '--pass', 'right']);
    const worker = shoal(defer, [...WORKER_ARGS, '--nats', `nats://127.0.0.1:${port}`], { NATS_USER: 'shoal', NATS_PASSWORD: 'wrong' });
    await worker.waitFor(/"attempt":2,"code":"UNAUTHORIZED"/, 30_000);
    expect(worker.output()).toContain('NATS refused the credentials');
    const stopped = await worker.stop('SIGINT');
    expect(stopped.ms).toBeLessThan(2_000);
    expect(stopped.code === 0 || stopped.code === 130).toBe(true);
  }, 45_000);

  it('a worker whose NATS never answers reports the timeout, and SIGTERM in the middle of an attempt still ends it at once', async ({ onTestFinished }) => {
    const defer: Defer = (cleanup) => onTestFinished(cleanup);
    const port = await silentPort(defer);
    const worker = shoal(defer, [...WORKER_ARGS, '--nats', `nats://127.0.0.1:${port}`]);
    await worker.waitFor(/"attempt":1,"code":"TIMEOUT","err":"[^"]*timed out/, 30_000);
    await worker.waitFor(/\(attempt 2\)/, 15_000);
    // Attempt 2 now hangs for up to the 5 s connect timeout: the signal must not wait for it.
    const stopped = await worker.stop('SIGTERM');
    expect(stopped.code).toBe(0);
    expect(stopped.ms).toBeLessThan(2_000);
  }, 45_000);

  it('a gateway never shows the NATS password of its URL, even one with "/" or "@" in it: not in /readyz (open), API errors or the log', async ({ onTestFinished }) => {
    const defer: Defer = (cleanup) => onTestFinished(cleanup);
    const [natsPort = 0, httpPort = 0] = await freePorts(2);
    // Generated passwords hold '/', '@'... and are often pasted unencoded.
    const gateway = shoal(defer, ['gateway', '--nats', `nats://shoal:pa55/w@rd-S3CRET@127.0.0.1:${natsPort}`, '--port', String(httpPort)]);
    await gateway.waitFor(/NATS connection failed; retrying/, 30_000);
    const base = `http://127.0.0.1:${httpPort}`;
    const notReady = await httpStatus(`${base}/readyz`);
    expect(notReady?.status).toBe(503);
    expect(notReady?.body).toContain(`connecting to NATS at nats://***@127.0.0.1:${natsPort}`);
    const call = await fetch(`${base}/v1/embeddings`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'm', input: 'a' }) });
    expect(call.status).toBe(503);
    const answer = await call.text();
    for (const text of [notReady?.body ?? '', answer, gateway.output()]) {
      expect(text).not.toContain('pa55');
      expect(text).not.toContain('S3CRET');
    }
    await gateway.stop('SIGTERM');
  }, 45_000);

  it('a gateway answers /healthz 200 and /readyz 503 with the reason while NATS is down, and is ready once it comes up', async ({ onTestFinished }) => {
    const defer: Defer = (cleanup) => onTestFinished(cleanup);
    const [natsPort = 0, httpPort = 0] = await freePorts(2);
    const gateway = shoal(defer, ['gateway', '--nats', `nats://127.0.0.1:${natsPort}`, '--port', String(httpPort)]);
    await gateway.waitFor(/NATS connection failed; retrying/, 30_000);
    const base = `http://127.0.0.1:${httpPort}`;
    expect((await httpStatus(`${base}/healthz`))?.status).toBe(200);
    const notReady = await httpStatus(`${base}/readyz`);
    expect(notReady?.status).toBe(503);
    expect(notReady?.body).toContain(`connecting to NATS at nats://127.0.0.1:${natsPort}`);
    expect(notReady?.body).toMatch(/attempt \d+ failed: UNAVAILABLE: .*connection refused/);
    await natsOn(defer, natsPort);
    // The retry backoff is capped at 5 s (reconnectMaxWaitMs), so it connects within a few seconds.
    const ready = await poll(() => httpStatus(`${base}/readyz`), (r) => r?.status === 200, 15_000);
    expect(ready?.status).toBe(200);
    expect(gateway.output()).toContain('NATS connected');
    const stopped = await gateway.stop('SIGTERM');
    expect(stopped.ms).toBeLessThan(2_000);
    expect(stopped.code === 0 || stopped.code === 143).toBe(true);
    expect(await httpStatus(`${base}/healthz`)).toBeNull();
  }, 60_000);
});
