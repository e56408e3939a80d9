import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { freePort } from './nats-server.js';

/**
 * Chroma's own local server (the Rust server shipped in the chromadb npm package) on a free
 * loopback port with a temp data folder. Ready when its heartbeat answers, not after a sleep.
 */

export interface ChromaServerHandle {
  readonly port: number;
  readonly url: string;
  halt(): Promise<void>;
  start(): Promise<void>;
  stop(): Promise<void>;
}

const CLI = resolve('node_modules/chromadb/dist/cli.mjs');

async function waitHeartbeat(port: number, child: ChildProcess, timeoutMs = 60_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  let exited = false;
  child.once('exit', () => {
    exited = true;
  });
  while (Date.now() < until && !exited) {
    try {
      const response = await fetch(`http://127.0.0.1:${port}/api/v2/heartbeat`);
      if (response.ok) return;
    } catch {
      // Not listening yet.
    }
    await new Promise((done) => setTimeout(done, 100));
  }
  throw new Error(`chroma server on port ${port} ${exited ? 'exited' : 'did not answer'} before it was ready`);
}

export async function startChromaServer(): Promise<ChromaServerHandle> {
  const dataDir = mkdtempSync(join(tmpdir(), 'shoal-chroma-'));
  const port = await freePort();
  let child: ChildProcess | null = null;
  const start = async (): Promise<void> => {
    if (child !== null) return;
    const proc = spawn(process.execPath, [CLI, 'run', '--path', dataDir, '--host', '127.0.0.1', '--port', String(port)], { stdio: ['ignore', 'ignore', 'ignore'] });
    child = proc;
    await waitHeartbeat(port, proc);
  };
  const halt = async (): Promise<void> => {
    const proc = child;
    child = null;
    if (proc === null || proc.exitCode !== null) return;
    const exited = new Promise<void>((done) => proc.once('exit', () => done()));
    proc.kill('SIGTERM');
    await exited;
  };
  await start();
  return {
    port,
    url: `chroma://127.0.0.1:${port}`,
    start,
    halt,
    stop: async () => {
      await halt();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
