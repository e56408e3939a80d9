import { spawn, type ChildProcess } from 'node:child_process';
import { tmpdir } from 'node:os';
import * as lancedb from '@lancedb/lancedb';
import { expect } from 'vitest';
import { z } from 'zod';
import { FIXTURE_MODELS_DIR, TINY_MEAN } from './nats-worker.js';
import { SHOAL_BIN } from './shoal-cli.js';
import { CLI_FROM_SOURCE } from './cli-build.js';

/**
 * Shared by the `shoal ingest --nats` tests: a real `shoal worker --parse` process (so a test can
 * SIGKILL it), the rows of an index, and the comparison of two runs' rows.
 */

export const INGEST_ENV = { SHOAL_MODEL_DIR: FIXTURE_MODELS_DIR };

export const Row = z.object({
  id: z.string(), document_id: z.string(), source: z.string(), page: z.number(), chunk: z.number(), text: z.string(),
  start: z.number(), end: z.number(), heading: z.string().nullable(), settings: z.string(),
  vector: z.custom<Iterable<number>>((value) => value !== null && typeof value === 'object' && Symbol.iterator in value).transform((value) => Array.from(value)),
});
export type Row = z.infer<typeof Row>;

export async function readRows(index: string): Promise<Row[]> {
  return readTableRows(index, Row);
}

/** Every row of an index's `chunks` table, parsed by `schema` (the columns a test compares), by id. */
export async function readTableRows<T extends { id: string }>(index: string, schema: z.ZodType<T>): Promise<T[]> {
  const db = await lancedb.connect(index);
  const table = await db.openTable('chunks');
  const rows: unknown[] = await table.query().toArray();
  table.close();
  db.close();
  return rows.map((row) => schema.parse(row)).sort((a, b) => (a.id < b.id ? -1 : 1));
}

export function startWorkerProcess(url: string, prefix: string): ChildProcess {
  return spawn(process.execPath, [SHOAL_BIN, 'worker', '--parse', '--models', TINY_MEAN, '--nats', url, '--prefix', prefix, '--ack-wait', '3000', '--concurrency', '8'], {
    cwd: tmpdir(),
    env: { ...process.env, ...INGEST_ENV, SHOAL_FROM_SOURCE: CLI_FROM_SOURCE, SHOAL_THREADS: '1', SHOAL_LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
}

/** Stops a worker started by startWorkerProcess (SIGTERM: it drains) and waits for it; nothing when it has exited. */
export async function stopWorkerProcess(worker: ChildProcess): Promise<void> {
  if (worker.exitCode !== null || worker.signalCode !== null) return;
  worker.kill('SIGTERM');
  await exited(worker);
}

export function expectSameRows(local: readonly Row[], remote: readonly Row[]): void {
  expect(remote.map((row) => row.id)).toEqual(local.map((row) => row.id));
  const strip = ({ vector: _v, ...rest }: Row): Omit<Row, 'vector'> => rest;
  expect(remote.map(strip)).toEqual(local.map(strip));
  let worst = 0;
  local.forEach((row, i) => {
    const other = remote[i]?.vector ?? [];
    expect(other).toHaveLength(row.vector.length);
    row.vector.forEach((value, j) => (worst = Math.max(worst, Math.abs(value - (other[j] ?? Number.NaN)))));
  });
  expect(worst).toBeLessThan(1e-5);
}


/** Waits for a child process to exit (at once when it already has). */
export function exited(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => child.once('exit', () => resolve()));
}
