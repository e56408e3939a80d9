import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { NatsConnection } from '@nats-io/transport-node';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { JobsClient } from '../../adapters/nats/jobs/jobs-client.js';
import { ResultIndexWriter } from '../../adapters/nats/results/result-index.js';
import { ShoalMetrics } from '../../adapters/observability/metrics.js';
import { EncodeResult } from '../../adapters/protocol/results.js';
import { openIndexUri } from '../../adapters/stores/open.js';
import { startSink, type SinkHandle } from '../../services/sink/main.js';
import type { ShoalWorker } from '../../services/worker/worker.js';
import { expectAllClose } from '../helpers/conformance.js';
import { NATS_SERVER_MISSING, natsServerAvailable, startNatsServer, type NatsServerHandle } from '../helpers/nats-server.js';
import { TINY_MEAN, quietLogger, startTestWorker, testConnection, uniquePrefix } from '../helpers/nats-worker.js';
import { startPgliteServer, type PgliteServerHandle } from '../helpers/pglite-server.js';
import { FIXTURES_DIR } from '../helpers/shared.js';
import { parseJsonl, runShoal } from '../helpers/shoal-cli.js';
import { startShoal } from '../helpers/shoal-process.js';

/**
 * `shoal sink --index postgres://…` against a real nats-server, a worker and PostgreSQL with
 * pgvector (PGlite over the wire protocol): a job ends as exactly one row per item with the
 * worker's vectors; with PostgreSQL stopped mid-run the job shows `degraded`, the gauge rises,
 * and after the restart the run ends with exactly the rows of the undisturbed one. A job whose
 * target is an index stores each item's text in its rows (`shoal search` shows them); jobs with
 * the default stream target keep their results to the vectors.
 */

const TABLE = 'job_vectors';
const NAMED_TABLE = 'named_vectors';
const TEXTS = Array.from({ length: 10 }, (_, i) => `indexed sentence ${i} about ${i % 2 === 0 ? 'harbours' : 'glaciers'}`);
const Row = z.strictObject({ id: z.string(), document_id: z.string(), page: z.number(), chunk: z.number(), settings: z.string(), text: z.string(), end: z.number(), vector: z.string() });
const Hit = z.object({ rank: z.number(), score: z.number(), id: z.string(), document_id: z.string(), text: z.string() });
type Row = z.infer<typeof Row>;

async function rowsOf(url: string, jobId: string, table = TABLE): Promise<Row[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const result = await client.query(`SELECT id, document_id, page, chunk, settings, text, "end", vector::text AS vector FROM ${table} WHERE document_id = $1 ORDER BY chunk`, [jobId]);
    return result.rows.map((row: unknown) => Row.parse(row));
  } finally {
    await client.end();
  }
}

const vectorOf = (row: Row): number[] => z.array(z.number()).parse(JSON.parse(row.vector));

describe.skipIf(!natsServerAvailable())(`results sink into pgvector ${natsServerAvailable() ? '' : NATS_SERVER_MISSING}`, () => {
  let server: NatsServerHandle;
  let postgres: PgliteServerHandle;
  let nc: NatsConnection;
  let worker: ShoalWorker;
  let jobs: JobsClient;
  let sink: SinkHandle;
  const metrics = new ShoalMetrics({ processMetrics: false });
  const prefix = uniquePrefix('sinkidx');
  const unusedDir = mkdtempSync(join(tmpdir(), 'shoal-sink-idx-'));
  const degradedGauge = async (): Promise<number> => (await metrics.sinkDegraded.get()).values.find((v) => v.labels.backend === 'pgvector')?.value ?? -1;
  const items = (prefixId: string): { id: string; text: string }[] => TEXTS.map((text, i) => ({ id: `${prefixId}-${i}`, text }));
  const published: number[][] = [];

  beforeAll(async () => {
    [server, postgres] = await Promise.all([startNatsServer(), startPgliteServer()]);
    worker = await startTestWorker(server.url, prefix, { models: [TINY_MEAN] });
    nc = await testConnection(server.url);
    jobs = await JobsClient.open(nc, { topology: { prefix }, indexNames: ['vecs'] });
    sink = await startSink({
      nats: { servers: [server.url] },
      prefix,
      dir: unusedDir,
      logger: quietLogger(),
      index: { uri: `${postgres.url}?table=${TABLE}` },
      indexes: { vecs: `${postgres.url}?table=${NAMED_TABLE}` },
      metrics,
      storeRetryMs: 1_000,
    });
  }, 60_000);

  afterAll(async () => {
    await sink?.drain();
    await worker?.drain();
    await nc?.close();
    await server?.stop();
    await postgres?.stop();
    rmSync(unusedDir, { recursive: true, force: true });
  });

  it('writes one row per item with the worker vectors, ids from the items, metadata from the job', async () => {
    await jobs.submit({ job_id: 'calm', primitive: 'encode', request: { model: TINY_MEAN, items: items('calm') }, part_items: 3 });
    await jobs.wait('calm', { timeoutMs: 30_000 });
    for await (const part of jobs.results('calm')) for (const item of EncodeResult.parse(part.result).items) published[item.index] = item.dense ?? [];
    expect(published.length).toBe(TEXTS.length);

    await expect.poll(async () => (await rowsOf(postgres.url, 'calm')).length, { timeout: 20_000, interval: 250 }).toBe(TEXTS.length);
    const rows = await rowsOf(postgres.url, 'calm');
    expect(rows.map((row) => [row.id, row.chunk, row.page, row.settings])).toEqual(TEXTS.map((_, i) => [`calm-${i}`, i, Math.floor(i / 3), TINY_MEAN]));
    rows.forEach((row, i) => expectAllClose(vectorOf(row), published[i] ?? [], 1e-6, `row ${i}`));
    // A stream-target job's results carry vectors only, so its rows have no text.
    expect(rows.map((row) => row.text)).toEqual(TEXTS.map(() => ''));
    expect(await degradedGauge()).toBe(0);
    expect((await jobs.status('calm'))?.degraded).toBeUndefined();
  });

  it('writing the same part again adds no row (upsert by id)', async () => {
    const opened = openIndexUri(`${postgres.url}?table=${TABLE}`);
    const writer = new ResultIndexWriter(opened.store);
    try {
      for await (const part of jobs.results('calm')) {
        if (part.part !== 0 || part.result === undefined) continue;
        await writer.write(part, part.result);
        await writer.write(part, part.result);
      }
    } finally {
      await writer.close();
    }
    expect((await rowsOf(postgres.url, 'calm')).map((row) => row.id)).toEqual(TEXTS.map((_, i) => `calm-${i}`));
  });

  it('a job with an index target goes into the named index; names not configured are refused at submit', async () => {
    await jobs.submit({ job_id: 'named', primitive: 'encode', request: { model: TINY_MEAN, items: items('named').slice(0, 4) }, part_items: 2, result: { kind: 'index', index: 'vecs' } });
    await jobs.wait('named', { timeoutMs: 30_000 });
    await expect.poll(async () => (await rowsOf(postgres.url, 'named', NAMED_TABLE)).length, { timeout: 20_000, interval: 250 }).toBe(4);
    const rows = await rowsOf(postgres.url, 'named', NAMED_TABLE);
    rows.forEach((row, i) => expectAllClose(vectorOf(row), published[i] ?? [], 1e-6, `row ${i}`));
    // The worker put each item's input text into the result, and the rows store it with its length as `end`.
    expect(rows.map((row) => [row.id, row.text, row.end])).toEqual(TEXTS.slice(0, 4).map((text, i) => [`named-${i}`, text, text.length]));
    for await (const part of jobs.results('named')) for (const item of EncodeResult.parse(part.result).items) expect(item.text).toBe(TEXTS[item.index]);
    // Into the named table only, not the sink's default one.
    expect(await rowsOf(postgres.url, 'named')).toEqual([]);

    // `shoal search` over that index (the model comes from the table's spec) shows the texts.
    const search = await runShoal(['search', TEXTS[1] ?? '', '--index', `${postgres.url}?table=${NAMED_TABLE}`, '--k', '4'], { env: { SHOAL_MODEL_DIR: join(FIXTURES_DIR, 'models') } });
    expect(search.code, search.stderr).toBe(0);
    const hits = parseJsonl(search.stdout, Hit);
    expect(hits.map((hit) => hit.rank)).toEqual([1, 2, 3, 4]);
    expect(hits.map((hit) => [hit.id, hit.text]).sort()).toEqual(TEXTS.slice(0, 4).map((text, i) => [`named-${i}`, text]));
    expect(hits.every((hit) => hit.document_id === 'named')).toBe(true);

    await expect(jobs.submit({ primitive: 'encode', request: { model: TINY_MEAN, items: ['x'] }, result: { kind: 'index', index: 'elsewhere' } })).rejects.toMatchObject({
      code: 'INVALID_INPUT',
      message: expect.stringMatching(/no index named "elsewhere" \(configured: vecs\)/),
    });
    await expect(jobs.submit({ primitive: 'encode', request: { model: TINY_MEAN, items: ['x'] }, result: { kind: 'index', index: '/etc/passwd' } })).rejects.toMatchObject({ code: 'INVALID_INPUT' });
    await expect(jobs.submit({ primitive: 'score', request: { model: TINY_MEAN, query: 'q', items: ['x'] }, result: { kind: 'index', index: 'vecs' } })).rejects.toMatchObject({
      code: 'INVALID_INPUT',
      message: expect.stringMatching(/takes encode jobs/),
    });
  });

  it('with PostgreSQL down the job shows degraded and the gauge rises; after the restart the rows are exactly those of the calm run', async () => {
    await postgres.halt();
    const haltedAt = Date.now();
    await jobs.submit({ job_id: 'storm', primitive: 'encode', request: { model: TINY_MEAN, items: items('storm') }, part_items: 3 });
    await jobs.wait('storm', { timeoutMs: 30_000 });

    await expect.poll(async () => (await jobs.status('storm'))?.degraded?.reason ?? '', { timeout: 15_000, interval: 250 }).toMatch(/cannot write into postgres:\/\/.*pgvector/);
    expect(await degradedGauge()).toBe(1);
    const status = await jobs.status('storm');
    expect(status?.state).toBe('completed');
    // Down for at least 10 s: results wait on the stream through several redeliveries.
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, 10_000 - (Date.now() - haltedAt))));
    expect(await degradedGauge()).toBe(1);
    await postgres.start();

    await expect.poll(async () => (await rowsOf(postgres.url, 'storm')).length, { timeout: 30_000, interval: 500 }).toBe(TEXTS.length);
    const rows = await rowsOf(postgres.url, 'storm');
    expect(rows.map((row) => [row.id, row.chunk, row.page])).toEqual(TEXTS.map((_, i) => [`storm-${i}`, i, Math.floor(i / 3)]));
    // Same texts and model as the calm run: the same vectors.
    rows.forEach((row, i) => expectAllClose(vectorOf(row), published[i] ?? [], 1e-6, `row ${i}`));
    await expect.poll(async () => (await jobs.status('storm'))?.degraded, { timeout: 10_000, interval: 250 }).toBeUndefined();
    expect(await degradedGauge()).toBe(0);
    const retries = (await metrics.sinkWrites.get()).values.filter((v) => v.labels.backend === 'pgvector' && v.labels.outcome === 'retry');
    expect(retries.reduce((sum, v) => sum + v.value, 0)).toBeGreaterThan(0);
    // Nothing duplicated or lost across both jobs.
    expect((await rowsOf(postgres.url, 'calm')).length).toBe(TEXTS.length);
  }, 60_000);

  it('the real `shoal sink --index postgres://…` process writes a job into its table and drains on SIGTERM', async () => {
    await sink.drain();
    const cli = startShoal(['sink', '--index', `${postgres.url}?table=cli_vectors`, '--nats', server.url, '--prefix', prefix], { env: { SHOAL_LOG_LEVEL: 'warn' } });
    try {
      await cli.waitFor(/shoal sink writing results into postgres:\/\/postgres@127\.0\.0\.1:\d+\/postgres\?table=cli_vectors/, 30_000);
      await jobs.submit({ job_id: 'cli', primitive: 'encode', request: { model: TINY_MEAN, items: items('cli').slice(0, 5) }, part_items: 2 });
      await jobs.wait('cli', { timeoutMs: 30_000 });
      await expect.poll(async () => (await rowsOf(postgres.url, 'cli', 'cli_vectors')).length, { timeout: 20_000, interval: 250 }).toBe(5);
      const rows = await rowsOf(postgres.url, 'cli', 'cli_vectors');
      expect(rows.map((row) => row.id)).toEqual([0, 1, 2, 3, 4].map((i) => `cli-${i}`));
      rows.forEach((row, i) => expectAllClose(vectorOf(row), published[i] ?? [], 1e-6, `row ${i}`));
    } finally {
      const exit = await cli.stop('SIGTERM');
      expect(exit.code, cli.output()).toBe(0);
    }
  }, 60_000);
});
