import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import { vector } from '@electric-sql/pglite-pgvector';
import { PGLiteSocketServer } from '@electric-sql/pglite-socket';
import { freePort } from './nats-server.js';
import { restartable, type Restartable } from './restartable.js';

/**
 * PostgreSQL 18 with pgvector (PGlite, WebAssembly) served on a loopback port over the real
 * Postgres wire protocol, so the production `pg` driver talks to it exactly as to a server
 * (PLATFORM.md). The database lives in a temp folder; `halt()` closes the port (clients see a
 * server that went away) and `start()` opens it again with the same data, for outage tests.
 */

export interface PgliteServerHandle extends Restartable {
  readonly port: number;
  /** `postgres://postgres@127.0.0.1:PORT/postgres` (PGlite accepts any password). */
  readonly url: string;
}

export async function startPgliteServer(): Promise<PgliteServerHandle> {
  const dataDir = mkdtempSync(join(tmpdir(), 'shoal-pglite-'));
  const db = await PGlite.create({ dataDir, extensions: { vector } });
  const port = await freePort();
  // The database stays open while the port is closed: a halt is an outage, not a lost database.
  const server = restartable({
    launch: () => new PGLiteSocketServer({ db, host: '127.0.0.1', port, maxConnections: 10 }),
    ready: (socket) => socket.start(),
    end: (socket) => socket.stop(),
    remove: async () => {
      await db.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  });
  await server.lifecycle.start();
  return {
    port,
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    ...server.lifecycle,
  };
}
