import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jetstream } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { JobsClient } from '../../adapters/nats/jobs/jobs-client.js';
import { EncodeResult } from '../../adapters/protocol/results.js';
import { startSink, type SinkHandle } from '../../services/sink/main.js';
import type { ShoalWorker } from '../../services/worker/worker.js';
import { expectAllClose } from '../helpers/conformance.js';
import { NATS_SERVER_MISSING, natsServerAvailable, startNatsServer, type NatsServerHandle } from '../helpers/nats-server.js';
import { TINY_CROSS, TINY_MEAN, emptyEncodePart, quietLogger, startTestWorker, testConnection, uniquePrefix } from '../helpers/nats-worker.js';

/**
 * The results sink against a real nats-server and worker: job results (also those published
 * before the sink started: its consumer is durable) land as JSON Lines per part with job-wide
 * indexes, failed parts as error files, results a job stored elsewhere are left alone, and a
 * restarted sink writes nothing twice.
 */

const TEXTS = Array.from({ length: 6 }, (_, i) => `sink sentence ${i} about ${i % 2 === 0 ? 'rivers' : 'mountains'}`);
const DenseLine = z.strictObject({ index: z.number(), id: z.string().optional(), dense: z.array(z.number()) });
const ScoreLine = z.strictObject({ index: z.number(), id: z.string().optional(), score: z.number() });

function linesOf(folder: string): unknown[] {
  return readdirSync(folder)
    .filter((name) => name.endsWith('.jsonl'))
    .sort()
    .flatMap((name) => readFileSync(join(folder, name), 'utf8').trim().split('\n').map((line): unknown => JSON.parse(line)));
}

describe.skipIf(!natsServerAvailable())(`results sink ${natsServerAvailable() ? '' : NATS_SERVER_MISSING}`, () => {
  let server: NatsServerHandle;
  let nc: NatsConnection;
  let worker: ShoalWorker;
  let jobs: JobsClient;
  let sink: SinkHandle | null = null;
  const written: string[] = [];
  const prefix = uniquePrefix('sink');
  const dir = mkdtempSync(join(tmpdir(), 'shoal-sink-'));
  const storeDir = mkdtempSync(join(tmpdir(), 'shoal-sink-store-'));
  const start = async (): Promise<SinkHandle> =>
    startSink({ nats: { servers: [server.url] }, prefix, dir, logger: quietLogger(), onWritten: (event) => written.push(`${event.jobId}/${event.part}`) });

  beforeAll(async () => {
    server = await startNatsServer();
    worker = await startTestWorker(server.url, prefix, { models: [TINY_MEAN, TINY_CROSS], fileRoots: [storeDir] });
    nc = await testConnection(server.url);
    jobs = await JobsClient.open(nc, { topology: { prefix }, fileRoots: [storeDir] });
  });

  afterAll(async () => {
    await sink?.drain();
    await worker?.drain();
    await nc?.close();
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
    rmSync(storeDir, { recursive: true, force: true });
  });

  it('writes the results of a job finished before the sink started, one line per item', async () => {
    const items = TEXTS.map((text, i) => ({ id: `doc-${i}`, text }));
    await jobs.submit({ job_id: 'before-sink', primitive: 'encode', request: { model: TINY_MEAN, items }, part_items: 4 });
    await jobs.wait('before-sink', { timeoutMs: 30_000 });
    sink = await start();

    const folder = join(dir, 'before-sink');
    await expect.poll(() => (existsSync(folder) ? readdirSync(folder).sort() : []), { timeout: 15_000 }).toEqual(['part-000000.jsonl', 'part-000001.jsonl']);
    const lines = linesOf(folder).map((line) => DenseLine.parse(line));
    expect(lines.map((line) => [line.index, line.id])).toEqual(items.map((item, i) => [i, item.id]));
    const published: number[][] = [];
    for await (const part of jobs.results('before-sink')) for (const item of EncodeResult.parse(part.result).items) published[item.index] = item.dense ?? [];
    lines.forEach((line, i) => expectAllClose(line.dense, published[i] ?? [], 0, `line ${i}`));
  });

  it('writes score jobs as one line per scored item, and failed parts as error files', async () => {
    await jobs.submit({ job_id: 'scores', primitive: 'score', request: { model: TINY_CROSS, query: 'rivers', items: TEXTS }, part_items: 3 });
    await jobs.wait('scores', { timeoutMs: 30_000 });
    await jetstream(nc).publish(jobs.topology.names.jobs('encode', TINY_MEAN), JSON.stringify(emptyEncodePart('bad-part')));
    await jobs.wait('bad-part', { timeoutMs: 30_000 });

    const scoreFolder = join(dir, 'scores');
    // Both parts' files written: counted by name, since a part being written atomically stands in
    // the folder under a temporary name first (counting every entry once read only part 0).
    const partFiles = (): string[] => (existsSync(scoreFolder) ? readdirSync(scoreFolder).filter((name) => name.endsWith('.jsonl')) : []);
    await expect.poll(() => partFiles().length, { timeout: 15_000 }).toBe(2);
    expect(readdirSync(scoreFolder).sort()).toEqual(['part-000000.jsonl', 'part-000001.jsonl']);
    const scores = linesOf(scoreFolder).map((line) => ScoreLine.parse(line));
    expect(scores.map((line) => line.index).sort((a, b) => a - b)).toEqual([0, 1, 2, 3, 4, 5]);

    const errorFile = join(dir, 'bad-part', 'part-000000.error.json');
    await expect.poll(() => existsSync(errorFile), { timeout: 15_000 }).toBe(true);
    const failure = z.looseObject({ job_id: z.string(), part: z.number(), error: z.looseObject({ code: z.string(), message: z.string() }) }).parse(JSON.parse(readFileSync(errorFile, 'utf8')));
    expect(failure).toMatchObject({ job_id: 'bad-part', part: 0, error: { code: 'INVALID_INPUT' } });
    expect(failure.error.message).toMatch(/items must not be empty/);
  });

  it('leaves results a job stored elsewhere alone, and a restarted sink rewrites nothing', async () => {
    const uri = `file://${storeDir}/own`;
    await jobs.submit({ job_id: 'own-store', primitive: 'encode', request: { model: TINY_MEAN, items: TEXTS.slice(0, 2) }, part_items: 1, result: { kind: 'store', uri } });
    await jobs.wait('own-store', { timeoutMs: 30_000 });
    // A marker job submitted after it: once the marker is written, the store job was handled too (stream order).
    await jobs.submit({ job_id: 'marker', primitive: 'encode', request: { model: TINY_MEAN, items: TEXTS.slice(0, 1) } });
    await jobs.wait('marker', { timeoutMs: 30_000 });
    // Waited for by the sink's own report: the file is renamed into place a moment before it
    // reports, and counting `written` between the two read the marker as written after the restart.
    await expect.poll(() => written.includes('marker/0'), { timeout: 15_000 }).toBe(true);
    expect(existsSync(join(dir, 'marker', 'part-000000.jsonl'))).toBe(true);
    expect(existsSync(join(dir, 'own-store'))).toBe(false);
    expect(existsSync(join(storeDir, 'own', 'own-store', 'part-0.jsonl'))).toBe(true);

    const before = written.length;
    await sink?.drain();
    sink = await start();
    await jobs.submit({ job_id: 'after-restart', primitive: 'encode', request: { model: TINY_MEAN, items: TEXTS.slice(0, 1) } });
    await jobs.wait('after-restart', { timeoutMs: 30_000 });
    await expect.poll(() => written.includes('after-restart/0'), { timeout: 15_000 }).toBe(true);
    // Only the new job's part was written after the restart: acked results are not redelivered.
    expect(written.slice(before)).toEqual(['after-restart/0']);
    expect(new Set(written).size).toBe(written.length);
  });
});
