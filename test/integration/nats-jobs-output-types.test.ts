import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as lancedb from '@lancedb/lancedb';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { JobsClient } from '../../adapters/nats/jobs/jobs-client.js';
import type { JobPartResult } from '../../adapters/protocol/jobs.js';
import { EncodeResult } from '../../adapters/protocol/results.js';
import { LanceDbStore } from '../../adapters/stores/lancedb/store.js';
import { startSink, type SinkHandle } from '../../services/sink/main.js';
import type { ShoalWorker } from '../../services/worker/worker.js';
import { NATS_SERVER_MISSING, natsServerAvailable, startNatsServer, type NatsServerHandle } from '../helpers/nats-server.js';
import { TINY_MEAN, quietLogger, startTestWorker, testConnection, uniquePrefix } from '../helpers/nats-worker.js';
import { referencePackbits, referenceValues } from '../helpers/reference-quantize.js';

/**
 * Encode jobs with output types through a real worker on a private nats-server: an `int8` job and
 * a `ubinary` + `dimensions` job, split into parts, against the independent reference
 * quantization of the same texts' float32 job. Each part's result says its type on the wire, and
 * a job with an `{kind: "index"}` target, written by a results sink into LanceDB, is stored as
 * that type (packed bytes, read back with LanceDB's own client).
 */

const TEXTS = Array.from({ length: 10 }, (_, i) => `sentence number ${i} about ${i % 2 === 0 ? 'cats on boats' : 'the stock market'}`);
const CUT = 6;

describe.skipIf(!natsServerAvailable())(`NATS jobs with output types ${natsServerAvailable() ? '' : NATS_SERVER_MISSING}`, () => {
  let server: NatsServerHandle;
  let nc: NatsConnection;
  let worker: ShoalWorker;
  let jobs: JobsClient;
  const prefix = uniquePrefix('dtype');
  const indexDir = mkdtempSync(join(tmpdir(), 'shoal-dtype-index-'));
  const resultsDir = mkdtempSync(join(tmpdir(), 'shoal-dtype-results-'));
  let sink: SinkHandle;
  /** Per job: its part results in part order. */
  const parts = new Map<string, JobPartResult[]>();

  async function run(jobId: string, request: Record<string, unknown>): Promise<number[][]> {
    await jobs.submit({ job_id: jobId, primitive: 'encode', request: { model: TINY_MEAN, items: TEXTS, ...request }, part_items: 4 });
    expect(await jobs.wait(jobId, { timeoutMs: 30_000 })).toMatchObject({ state: 'completed', parts: 3, parts_done: 3 });
    const results: JobPartResult[] = [];
    for await (const part of jobs.results(jobId)) results.push(part);
    parts.set(jobId, results);
    const vectors: number[][] = [];
    for (const part of results) for (const item of EncodeResult.parse(part.result).items) vectors[item.index] = item.dense ?? [];
    return vectors;
  }

  beforeAll(async () => {
    server = await startNatsServer();
    worker = await startTestWorker(server.url, prefix, { models: [TINY_MEAN] });
    nc = await testConnection(server.url);
    jobs = await JobsClient.open(nc, { topology: { prefix }, indexNames: ['typed'] });
    // The results sink with one named index: jobs naming it are written there.
    sink = await startSink({ nats: { servers: [server.url] }, prefix, dir: resultsDir, logger: quietLogger(), indexes: { typed: `lancedb://${indexDir}?table=typed` } });
  });

  afterAll(async () => {
    await sink?.drain();
    await worker?.drain();
    await nc?.close();
    await server?.stop();
    rmSync(indexDir, { recursive: true, force: true });
    rmSync(resultsDir, { recursive: true, force: true });
  });

  it('int8 and ubinary + dimensions jobs give the reference quantization of the float32 job, and say their type per part', async () => {
    const float32 = await run('plain', {});
    const int8 = await run('codes', { dtype: 'int8' });
    const bits = await run('bits', { dtype: 'ubinary', dimensions: CUT });
    expect(float32).toHaveLength(TEXTS.length);

    // The result envelope carries the type (a float32 job's carries none).
    expect(parts.get('plain')?.map((part) => [part.dtype, part.dimensions])).toEqual([[undefined, undefined], [undefined, undefined], [undefined, undefined]]);
    expect(parts.get('codes')?.map((part) => part.dtype)).toEqual(['int8', 'int8', 'int8']);
    expect(parts.get('bits')?.map((part) => [part.dtype, part.dimensions])).toEqual([['ubinary', CUT], ['ubinary', CUT], ['ubinary', CUT]]);

    float32.forEach((vector, i) => {
      // int8: the fixed [-1, 1] calibration. Worker batches may move the last float32 digit, which
      // can move a code across a boundary: at most one code, and nearly all exact.
      const expected = referenceValues(vector, 'int8');
      const got = int8[i] ?? [];
      expect(got, `item ${i}`).toHaveLength(vector.length);
      expect(got.filter((code, d) => Math.abs(code - (expected[d] ?? Number.NaN)) > 1), `item ${i}`).toEqual([]);
      expect(got.every((code) => Number.isInteger(code) && code >= -128 && code <= 127)).toBe(true);
      // ubinary with a Matryoshka cut: the sign bits of the first CUT values (renormalizing never changes a sign).
      expect(bits[i], `item ${i}`).toEqual(referencePackbits(vector.slice(0, CUT)));
    });
    const exact = float32.flatMap((vector, i) => referenceValues(vector, 'int8').filter((code, d) => code === int8[i]?.[d]));
    expect(exact.length / (float32.length * (float32[0]?.length ?? 1))).toBeGreaterThan(0.95);
  });

  it('a {kind: "index"} job with ubinary + dimensions is stored as packed bytes in a ubinary table, searchable with the same conversion', async () => {
    await jobs.submit({ job_id: 'indexed', primitive: 'encode', request: { model: TINY_MEAN, items: TEXTS, dtype: 'ubinary', dimensions: CUT }, part_items: 4, result: { kind: 'index', index: 'typed' } });
    expect(await jobs.wait('indexed', { timeoutMs: 30_000 })).toMatchObject({ state: 'completed', parts_done: 3 });
    // A fresh reader per poll: a LanceDB connection opened before the table existed keeps not seeing it.
    const rowsWritten = async (): Promise<number> => {
      const reader = new LanceDbStore({ dir: indexDir, table: 'typed' });
      const count = await reader.count("document_id = 'indexed'");
      await reader.close();
      return count;
    };
    await expect.poll(rowsWritten, { timeout: 20_000, interval: 250 }).toBe(TEXTS.length);
    const index = new LanceDbStore({ dir: indexDir, table: 'typed' });
    expect(await index.describe()).toMatchObject({ vectorType: 'ubinary', dimension: 1, metadata: { model: TINY_MEAN, dimensions: String(CUT) } });

    // Read back with LanceDB's own client: one packed byte per row, the bits job's value for the same item.
    const table = await (await lancedb.connect(indexDir)).openTable('typed');
    expect(String((await table.schema()).fields.find((field) => field.name === 'vector')?.type)).toBe('FixedSizeList[1]<Uint8>');
    const Stored = z.array(z.object({ chunk: z.number(), vector: z.custom<Iterable<number>>((value) => typeof value === 'object' && value !== null) }));
    const rows = Stored.parse(await table.query().where("document_id = 'indexed'").select(['chunk', 'vector']).toArray());
    const bits = (parts.get('bits') ?? []).flatMap((part) => EncodeResult.parse(part.result).items);
    expect(new Map(rows.map((row) => [row.chunk, Array.from(row.vector)]))).toEqual(new Map(bits.map((item) => [item.index, item.dense])));
    // A query in the same form finds its own row at Hamming distance 0 (score 1).
    const [hit] = await index.search(bits[3]?.dense ?? [], { k: 1, filter: "document_id = 'indexed' AND chunk = 3" });
    expect(hit?.score).toBe(1);
    await index.close();
  });
});
