import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { freePort } from './nats-server.js';
import { restartableChild, type Restartable } from './restartable.js';

/**
 * Chroma's own local server (the Rust server shipped in the chromadb npm package) on a free
 * loopback port with a temp data folder. Ready when its heartbeat answers, not after a sleep.
 */

export interface ChromaServerHandle extends Restartable {
  readonly port: number;
  readonly url: string;
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
  const server = restartableChild({
    launch: () => spawn(process.execPath, [CLI, 'run', '--path', dataDir, '--host', '127.0.0.1', '--port', String(port)], { stdio: ['ignore', 'ignore', 'ignore'] }),
    ready: (child) => waitHeartbeat(port, child),
    remove: () => rmSync(dataDir, { recursive: true, force: true }),
  });
  await server.lifecycle.start();
  return {
    port,
    url: `chroma://127.0.0.1:${port}`,
    ...server.lifecycle,
  };
}
