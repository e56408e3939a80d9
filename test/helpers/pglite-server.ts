import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import { vector } from '@electric-sql/pglite-pgvector';
import { PGLiteSocketServer } from '@electric-sql/pglite-socket';
import { freePort } from './nats-server.js';

/**
 * PostgreSQL 18 with pgvector (PGlite, WebAssembly) served on a loopback port over the real
 * Postgres wire protocol, so the production `pg` driver talks to it exactly as to a server
 * (PLATFORM.md). The database lives in a temp folder; `halt()` closes the port (clients see a
 * server that went away) and `start()` opens it again with the same data, for outage tests.
 */

export interface PgliteServerHandle {
  readonly port: number;
  /** `postgres://postgres@127.0.0.1:PORT/postgres` (PGlite accepts any password). */
  readonly url: string;
  halt(): Promise<void>;
  start(): Promise<void>;
  stop(): Promise<void>;
}

export async function startPgliteServer(): Promise<PgliteServerHandle> {
  const dataDir = mkdtempSync(join(tmpdir(), 'shoal-pglite-'));
  const db = await PGlite.create({ dataDir, extensions: { vector } });
  const port = await freePort();
  let server: PGLiteSocketServer | null = null;
  const start = async (): Promise<void> => {
    if (server !== null) return;
    server = new PGLiteSocketServer({ db, host: '127.0.0.1', port, maxConnections: 10 });
    await server.start();
  };
  const halt = async (): Promise<void> => {
    const running = server;
    server = null;
    await running?.stop();
  };
  await start();
  return {
    port,
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    start,
    halt,
    stop: async () => {
      await halt();
      await db.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
