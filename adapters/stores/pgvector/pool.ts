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

/**
 * How long a query may wait for the server's answer (`query_timeout=` in the index URI, else
 * SHOAL_STORE_TIMEOUT_MS, the other server stores' request timeout, 60 s by default) before it
 * fails UNAVAILABLE (retried as any outage) and its connection is dropped. Without one, a
 * connection that never answers (a server or middlebox that lost the reply, a half-open TCP
 * connection) holds its caller for ever: a document worker's batch then keeps its jobs (their ack
 * wait extended while it works) and the run never ends. Index builds (HNSW, the text index) take
 * LONG_QUERY_TIMEOUT_MS instead: on a large table they take minutes.
 */
export const DEFAULT_QUERY_TIMEOUT_MS = 60_000;
export const LONG_QUERY_TIMEOUT_MS = 24 * 3_600_000;

/** A query with its own read timeout: node-postgres reads `query_timeout` per query too (its types leave it out). */
interface TimedQueryConfig extends pg.QueryConfig {
  query_timeout: number;
}

/** A statement that may run for minutes (an index build): its own read timeout instead of the pool's. */
export function longStatement(text: string, values: unknown[] = []): TimedQueryConfig {
  return { text, values, query_timeout: LONG_QUERY_TIMEOUT_MS };
}

export function openPool(connection: PgConnection, maxConnections: number, connectTimeoutMs: number, queryTimeoutMs: number = DEFAULT_QUERY_TIMEOUT_MS): pg.Pool {
  const pool = new pg.Pool({
    host: connection.host,
    port: connection.port,
    user: connection.user,
    ...(connection.password === undefined ? {} : { password: connection.password }),
    database: connection.database,
    ssl: connection.ssl,
    max: maxConnections,
    connectionTimeoutMillis: connectTimeoutMs,
    query_timeout: queryTimeoutMs,
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
    /Connection terminated|timeout exceeded|connection ended|Client has encountered a connection error/i.test(message) || readTimedOut(error);
  // Refused credentials, a missing database or an unknown host will not heal by waiting.
  const misconfigured = /^(28\d\d\d|28P01|3D000|ENOTFOUND)$/.test(code);
  const kind = transient ? ErrorCode.UNAVAILABLE : misconfigured ? ErrorCode.CONFIG_INVALID : ErrorCode.INTERNAL;
  return new ShoalError(kind, `pgvector ${what}: ${message}`, { cause: error });
}

/** A query that timed out waiting for its answer: its connection is stuck behind it and must not be reused. */
function readTimedOut(error: unknown): boolean {
  return error instanceof Error && /Query read timeout/.test(error.message);
}

export async function query<R extends pg.QueryResultRow>(pool: pg.Pool, what: string, text: string | pg.QueryConfig, params: unknown[] = []): Promise<pg.QueryResult<R>> {
  try {
    // pg-pool drops the connection of a query that failed (a read timeout included).
    return typeof text === 'string' ? await pool.query<R>(text, params) : await pool.query<R>(text);
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
    // A statement that got no answer leaves the connection waiting for it: a ROLLBACK would only
    // queue behind it. Dropping the connection ends the transaction on the server.
    if (readTimedOut(error)) broken = true;
    else {
      try {
        await client.query('ROLLBACK');
      } catch {
        // The connection itself failed: it is discarded below instead of going back to the pool.
        broken = true;
      }
    }
    throw classify(error, what);
  } finally {
    client.off('error', onError);
    client.release(broken);
  }
}
