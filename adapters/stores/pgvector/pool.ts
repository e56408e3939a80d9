import pg from 'pg';
import { ErrorCode, ShoalError } from '../../protocol/errors.js';

/**
 * The pgvector sink's connections (pgvector/store.ts): the pool, one query or one transaction on it, and
 * every driver failure classed as a ShoalError (worth a retry, misconfigured, or internal).
 */

export interface PgConnection {
  host: string;
  port: number;
  user: string;
  password?: string | undefined;
  database: string;
  /** false: plain TCP; otherwise TLS (`sslmode=require`: encrypted, certificate not checked; `verify-full`: checked against `ca` or the system roots). */
  ssl: false | { rejectUnauthorized: boolean; ca?: string | undefined };
}

export function openPool(connection: PgConnection, maxConnections: number, connectTimeoutMs: number): pg.Pool {
  const pool = new pg.Pool({
    host: connection.host,
    port: connection.port,
    user: connection.user,
    ...(connection.password === undefined ? {} : { password: connection.password }),
    database: connection.database,
    ssl: connection.ssl,
    max: maxConnections,
    connectionTimeoutMillis: connectTimeoutMs,
    idleTimeoutMillis: 10_000,
  });
  // An idle client whose server went away must not crash the process; the next query reconnects.
  pool.on('error', () => undefined);
  return pool;
}

/** Network failures and server shutdowns are worth a retry; SQL errors are not. */
function classify(error: unknown, what: string): ShoalError {
  if (error instanceof ShoalError) return error;
  const code = typeof error === 'object' && error !== null && 'code' in error ? String(error.code) : '';
  const message = error instanceof Error ? error.message : String(error);
  const transient = /^(ECONNREFUSED|ECONNRESET|ETIMEDOUT|EPIPE|EAI_AGAIN|57P0[123]|08\d\d\d|53300|40001|40P01)$/.test(code) ||
    /Connection terminated|timeout exceeded|connection ended|Client has encountered a connection error/i.test(message);
  // Refused credentials, a missing database or an unknown host will not heal by waiting.
  const misconfigured = /^(28\d\d\d|28P01|3D000|ENOTFOUND)$/.test(code);
  const kind = transient ? ErrorCode.UNAVAILABLE : misconfigured ? ErrorCode.CONFIG_INVALID : ErrorCode.INTERNAL;
  return new ShoalError(kind, `pgvector ${what}: ${message}`, { cause: error });
}

export async function query<R extends pg.QueryResultRow>(pool: pg.Pool, what: string, text: string, params: unknown[] = []): Promise<pg.QueryResult<R>> {
  try {
    return await pool.query<R>(text, params);
  } catch (error) {
    throw classify(error, what);
  }
}

/** Runs `body` in one transaction on one client: committed when it returns, rolled back when it throws. */
export async function transaction<T>(pool: pg.Pool, what: string, body: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  let client: pg.PoolClient;
  try {
    client = await pool.connect();
  } catch (error) {
    throw classify(error, what);
  }
  let broken = false;
  // A server that goes away while this client is checked out emits 'error' on it: without a
  // listener that would crash the process; the failing query below reports it instead.
  const onError = (): void => {
    broken = true;
  };
  client.on('error', onError);
  try {
    await client.query('BEGIN');
    const out = await body(client);
    await client.query('COMMIT');
    return out;
  } catch (error) {
    try {
      await client.query('ROLLBACK');
    } catch {
      // The connection itself failed: it is discarded below instead of going back to the pool.
      broken = true;
    }
    throw classify(error, what);
  } finally {
    client.off('error', onError);
    client.release(broken);
  }
}
