import { ShoalSettings } from '../../services/settings/shoal-settings.js';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { text } from 'node:stream/consumers';
import { jetstream } from '@nats-io/jetstream';
import { Objm } from '@nats-io/obj';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ClassifyLedger } from '../../adapters/nats/classify/ledger.js';
import { ingestNames } from '../../adapters/nats/ingest/ingest-store.js';
import { ShoalMetrics } from '../../adapters/observability/metrics.js';
import { Classification, type ClassifyItem } from '../../adapters/protocol/classify.js';
import { classifyJobNames } from '../../adapters/protocol/classify-jobs.js';
import { natsNames } from '../../adapters/protocol/subjects.js';
import { parseTaxonomy } from '../../adapters/taxonomy/index.js';
import { TaxonomyClassifier } from '../../pipelines/classify/index.js';
import { ClassifyProducer } from '../../pipelines/classify/classify-producer.js';
import type { InferenceEngine } from '../../pipelines/inference/engine.js';
import { resolveWorkerConfig } from '../../services/worker/config.js';
import { ShoalWorker } from '../../services/worker/worker.js';
import { eventually, NATS_SERVER_MISSING, natsServerAvailable, startNatsServer, type NatsServerHandle } from '../helpers/nats-server.js';
import { TINY_MEAN, quietLogger, referenceEngine, startTestWorker, testConnection, testWorkerConfig, uniquePrefix } from '../helpers/nats-worker.js';
import { DATA_DIR, sharedAvailable } from '../helpers/shared.js';

/**
 * Classification jobs (issue 35, item 5) with in-process workers: one model worker, classify
 * workers with no model of their own. A run's results are the lines of an in-process
 * classification of the same products, in catalog order; a second classify worker with an empty
 * cache folder reads the category matrix from the object store instead of embedding the taxonomy
 * again; a chunk published twice under other message ids is counted once; a spec whose taxonomy
 * cannot be read, or whose result target the workers may not write, fails the run with why.
 */

const PRODUCTS = join(DATA_DIR, 'products', 'flipkart-1050.jsonl');
const GOOGLE = join(DATA_DIR, 'taxonomy', 'google-taxonomy-with-ids.en-US.txt');
const available = natsServerAvailable() && sharedAvailable(PRODUCTS) && sharedAvailable(GOOGLE);

/** Line for line the same decisions; float32 noise from other batch shapes may swap candidates tied within 1e-5. */
function expectSameLines(got: Classification[], want: Classification[]): void {
  expect(got.map((line) => line.id)).toEqual(want.map((line) => line.id));
  want.forEach((line, at) => {
    const other = got[at] as Classification;
    expect(Math.abs(other.score - line.score)).toBeLessThan(1e-5);
    if (other.category.id !== line.category.id) expect(Math.abs((other.alternatives[0]?.score ?? 0) - line.score)).toBeLessThan(1e-5);
    expect(other.needs_review).toBe(line.needs_review);
  });
}

describe.skipIf(!available)(`classification jobs ${natsServerAvailable() ? '' : NATS_SERVER_MISSING}`, () => {
  let server: NatsServerHandle;
  let nc: NatsConnection;
  let producer: ClassifyProducer;
  let engine: InferenceEngine;
  const prefix = uniquePrefix('clsjobs');
  const dir = mkdtempSync(join(tmpdir(), 'shoal-classify-jobs-'));
  const workers: ShoalWorker[] = [];
  const taxonomyText = readFileSync(GOOGLE, 'utf8');
  const items: ClassifyItem[] = readFileSync(PRODUCTS, 'utf8')
    .split('\n')
    .slice(0, 150)
    .map((line) => JSON.parse(line) as { uniq_id: string; title: string; description?: string })
    .map((record) => ({ id: record.uniq_id, text: `${record.title}\n${record.description ?? ''}`.slice(0, 2000) }));
  const request = { model: TINY_MEAN, taxonomy: taxonomyText, top_k: 3 };

  async function classifyWorker(cache: string, metrics: ShoalMetrics): Promise<ShoalWorker> {
    const config = resolveWorkerConfig(testWorkerConfig(server.url, prefix, { models: [], classify: true, consumer: { ackWaitMs: 10_000, maxDeliver: 5 } }));
    const worker = await ShoalWorker.start(config, { logger: quietLogger(), metrics, settings: ShoalSettings.of({ ...process.env, SHOAL_CACHE_DIR: join(dir, cache) }) });
    workers.push(worker);
    return worker;
  }

  async function runToEnd(runId: string, extra: Partial<Parameters<ClassifyProducer['publish']>[0]> = {}): Promise<Classification[]> {
    const published = await producer.publish({ runId, request, items, chunkItems: 32, ...extra });
    expect(published).toMatchObject({ chunks: 5, items: 150 });
    const record = await producer.follow(runId);
    expect(record).toMatchObject({ state: 'completed', items: 150, items_done: 150, chunks: 5, chunks_done: 5, error: null });
    if (record === null) throw new Error('no status');
    const lines = (await text(await producer.results(record))).split('\n').filter((line) => line !== '');
    return lines.map((line) => Classification.parse(JSON.parse(line)));
  }

  beforeAll(async () => {
    server = await startNatsServer();
    workers.push(await startTestWorker(server.url, prefix, { models: [TINY_MEAN], concurrency: 8 }));
    nc = await testConnection(server.url);
    producer = await ClassifyProducer.open(nc, { prefix });
    engine = referenceEngine();
  }, 60_000);

  afterAll(async () => {
    producer?.close();
    await nc?.close();
    await Promise.all(workers.map((worker) => worker.close().catch(() => undefined)));
    await engine?.close();
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  }, 60_000);

  it('gives the lines of an in-process run in catalog order; a second worker reads the category matrix from the object store', async () => {
    const first = new ShoalMetrics({ processMetrics: false });
    const worker = await classifyWorker('cache-a', first);
    const lines = await runToEnd('run-a');
    const local = await TaxonomyClassifier.open(engine, parseTaxonomy(taxonomyText), { model: TINY_MEAN, topK: 3 });
    try {
      expectSameLines(lines, await local.classify(items));
    } finally {
      await local.close();
    }
    expect(await first.registry.getSingleMetricAsString('shoal_classify_category_matrices_total')).toContain('source="built"} 1');
    // The chunk objects are gone once the results are written; the matrix stays in the object store.
    const names = classifyJobNames(natsNames(prefix));
    const obj = await new Objm(nc).open(natsNames(prefix).payloadBucket);
    expect((await obj.info(names.chunkObject('run-a', 0)))?.deleted ?? true).toBe(true);
    const stored = (await obj.list()).filter((info) => !info.deleted).map((info) => info.name).filter((name) => name.startsWith('classify/categories/'));
    expect(stored).toHaveLength(2);

    // Another worker with an empty cache folder: the matrix comes from the object store.
    await worker.close();
    const second = new ShoalMetrics({ processMetrics: false });
    await classifyWorker('cache-b', second);
    const again = await runToEnd('run-b');
    expect(again).toEqual(lines);
    const matrices = await second.registry.getSingleMetricAsString('shoal_classify_category_matrices_total');
    expect(matrices).toContain('source="store"} 1');
    expect(matrices).not.toContain('source="built"');
  }, 240_000);

  it('counts a chunk published twice once, dead-letters a message that is no chunk, and fails a run whose taxonomy cannot be read or whose target the workers may not write', async () => {
    const names = classifyJobNames(natsNames(prefix));
    const js = jetstream(nc);
    const published = await producer.publish({ runId: 'run-dup', request: { model: TINY_MEAN, labels: ['shoes', 'phones', 'kitchen'] }, items: items.slice(0, 40), chunkItems: 16 });
    // The same chunk again under another message id (a producer that lost its dedupe window).
    await js.publish(names.chunks, JSON.stringify({ v: 1, run_id: 'run-dup', chunk: 1, spec_ref: `obj://${natsNames(prefix).payloadBucket}/${names.specObject('run-dup')}`, first_index: 16, items: items.slice(16, 32), submitted_at: new Date().toISOString() }));
    const record = await producer.follow('run-dup');
    expect(record).toMatchObject({ state: 'completed', items: 40, items_done: 40, chunks: 3, chunks_done: 3 });
    if (record === null) throw new Error('no status');
    const lines = (await text(await producer.results(record))).split('\n').filter((line) => line !== '');
    expect(lines.map((line) => (JSON.parse(line) as { id: string }).id)).toEqual(items.slice(0, 40).map((item) => item.id));
    expect(published.chunks).toBe(3);

    // A message that is no chunk is dead-lettered once, with why.
    await js.publish(names.chunks, JSON.stringify({ v: 1, run_id: 'run-poison', chunk: 0 }));
    const dlq = natsNames(prefix).deadLetterStream;
    await eventually(async () => {
      const info = await (await js.streams.get(dlq)).info(false, { subjects_filter: names.deadLetter });
      expect(info.state.messages).toBe(1);
    }, 30_000);
    const dead = await (await js.streams.get(dlq)).getMessage({ last_by_subj: names.deadLetter });
    expect(dead?.header.get('Shoal-Dead-Reason')).toContain('not a classification chunk');

    await producer.publish({ runId: 'run-bad', request: { model: TINY_MEAN, taxonomy: 'id,path\n1,Shoes' }, items: items.slice(0, 3) });
    const failed = await producer.follow('run-bad');
    expect(failed?.state).toBe('failed');
    expect(failed?.error?.code).toBe('INVALID_INPUT');

    // A target the workers may not write (no file roots here) fails the run at its first chunk, not after its last.
    await producer.publish({ runId: 'run-target', request: { model: TINY_MEAN, labels: ['a', 'b'] }, items: items.slice(0, 3), result: `file://${join(dir, 'out.jsonl')}` });
    const refused = await producer.follow('run-target');
    expect(refused).toMatchObject({ state: 'failed', items_done: 0, error: { code: 'INVALID_INPUT' } });
    expect(refused?.error?.message).toContain('file references are turned off on this worker');
  }, 120_000);

  it('counts each chunk once however many workers count it at once; exactly one write starts the assembly', async () => {
    const ledger = await ClassifyLedger.open(nc, ingestNames(natsNames(prefix)).bucket);
    const seed = { model: TINY_MEAN, specRef: 'obj://x/spec.json', result: 'obj://x/results.jsonl' };
    const end = { v: 1 as const, run_id: 'run-race', spec_ref: seed.specRef, chunks: 40, items: 400, submitted_at: new Date().toISOString() };
    // Each of 40 chunks counted by three "workers" at once, the end recorded in the middle of it all.
    const counts = Array.from({ length: 120 }, (_, n) => ledger.countChunk('run-race', n % 40, 10, seed, 7));
    const announced = ledger.announce(end, seed);
    const outcomes = await Promise.all(counts);
    const announcement = await announced;
    expect(outcomes.filter((outcome) => outcome.counted)).toHaveLength(40);
    const stored = await ledger.get('run-race');
    expect(stored?.record).toMatchObject({ state: 'assembling', chunks: 40, chunks_done: 40, items: 400, items_done: 400, categories: 7 });
    // The write that moved the run to `assembling` is the one whose writer assembles: there is one.
    const starters = outcomes.filter((outcome) => outcome.counted && outcome.record.state === 'assembling').length + (announcement.state === 'assembling' ? 1 : 0);
    expect(starters).toBe(1);
    expect((await ledger.complete('run-race', seed)).state).toBe('completed');
    // Late repeats change nothing.
    expect((await ledger.countChunk('run-race', 3, 10, seed, 7)).counted).toBe(false);
    expect((await ledger.get('run-race'))?.record).toMatchObject({ state: 'completed', chunks_done: 40, items_done: 400 });
  }, 60_000);
});
