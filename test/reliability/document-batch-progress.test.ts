import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { NatsConnection } from '@nats-io/transport-node';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openPdf, renderPdfPage } from '../../adapters/documents/pdf-reader.js';
import { writePdf } from '../../adapters/documents/pdf-writer.js';
import { ShoalMetrics } from '../../adapters/observability/metrics.js';
import type { FollowedRun } from '../../pipelines/documents/document-producer.js';
import { DocumentParser } from '../../pipelines/documents/parse.js';
import { InferenceEngine } from '../../pipelines/inference/engine.js';
import { resolveWorkerConfig } from '../../services/worker/config.js';
import { ShoalWorker } from '../../services/worker/worker.js';
import { capturingLogger } from '../helpers/capturing-logger.js';
import { runOneDocument } from '../helpers/document-run.js';
import { natsServerAvailable, NATS_SERVER_MISSING, startNatsServer, type NatsServerHandle } from '../helpers/nats-server.js';
import { TINY_MEAN, startTestWorker, testConnection, testWorkerConfig } from '../helpers/nats-worker.js';

/**
 * The other side of the stall limit (document-batch-stall.test.ts): a batch that takes longer
 * than SHOAL_DOCUMENTS_STALL_MS but keeps making progress is not given up. The batch is one
 * scanned document (a multi-page TIFF) whose only signs of life for most of its run are its pages
 * being OCR'd one by one: each page reaches the batch's clock from the parse thread (ParserCache
 * `onPage` → the worker's clocks by source). Without that wiring the batch is given up mid-OCR.
 *
 * OCR speed differs several-fold between machines and with load, so the limit is set from this
 * machine's measured time per page (six pages' worth, at least 3 s) and the scan has enough pages
 * to last about three limits.
 */

const LINE = 'Ferry to Ostmund leaves at noon.';
const PAGES_PER_LIMIT = 6;
const MIN_STALL_MS = 3_000;
const LIMITS_PER_SCAN = 3;
/** Bounds the scan on a machine whose pages take a few milliseconds; at 60 a fast host's scan (54 ms a page) lasted 4.3 s against a 3 s limit, barely over it. */
const MAX_PAGES = 400;

describe.skipIf(!natsServerAvailable())('a documents batch slower than the stall limit that keeps making progress', () => {
  let server: NatsServerHandle;
  let root: string;
  let nc: NatsConnection;
  let stallMs = 0;
  let pages = 0;
  let linePng: Buffer;
  const workers: ShoalWorker[] = [];
  const metrics = new ShoalMetrics();
  const log = capturingLogger();

  async function scan(path: string, count: number): Promise<void> {
    await writeFile(path, await sharp(Array<Buffer>(count).fill(linePng), { join: { animated: true } }).tiff().toBuffer());
  }

  /** Milliseconds per page of a warm parser on this machine, now: a 4-page scan timed after a 2-page one warmed the OCR models. */
  async function msPerPage(): Promise<number> {
    const engine = new InferenceEngine();
    const parser = new DocumentParser(engine);
    const parseScan = async (count: number): Promise<number> => {
      const path = join(root, `calibrate-${count}.tif`);
      await scan(path, count);
      const started = performance.now();
      const outcome = await parser.parse({ uri: path, path });
      if (!outcome.ok) throw new Error(`calibration scan failed: ${outcome.code} ${outcome.reason}`);
      return performance.now() - started;
    };
    try {
      await parseScan(2);
      return (await parseScan(4)) / 4;
    } finally {
      await parser.close();
      await engine.close();
    }
  }

  beforeAll(async () => {
    server = await startNatsServer();
    root = await mkdtemp(join(tmpdir(), 'shoal-batch-progress-'));
    await mkdir(join(root, 'pipelines'));
    await mkdir(join(root, 'files'));
    await writeFile(join(root, 'pipelines', 'scan.yaml'), `name: scan\nstages:\n  encode:\n    model: ${TINY_MEAN}\n`);
    // One line of text, rendered as a scanner would (150 dpi): a small page, so OCR takes a fraction of a second.
    const pdf = await openPdf(writePdf([{ width: 420, height: 50, lines: [{ text: LINE, x: 20, y: 32, size: 18 }] }]));
    linePng = Buffer.from(await renderPdfPage(pdf, 1, 150));
    await pdf.destroy();

    const perPage = await msPerPage();
    stallMs = Math.max(MIN_STALL_MS, Math.ceil(PAGES_PER_LIMIT * perPage));
    pages = Math.min(MAX_PAGES, Math.ceil((LIMITS_PER_SCAN * stallMs) / perPage));
    console.info(`batch progress: ${perPage.toFixed(0)} ms per OCR page here; stall limit ${stallMs} ms, scan of ${pages} pages`);

    workers.push(await startTestWorker(server.url, 'shoal'));
    const documents = testWorkerConfig(server.url, 'shoal', {
      models: [],
      documents: true,
      documentPipelines: ['scan'],
      pipelinesDir: join(root, 'pipelines'),
      indexes: { docs: join(root, 'index') },
      fileRoots: [join(root, 'files')],
      documentStallMs: stallMs,
      consumer: { ackWaitMs: 5_000, maxDeliver: 2 },
    });
    workers.push(await ShoalWorker.start(resolveWorkerConfig(documents), { logger: log.logger, metrics }));
    nc = await testConnection(server.url);
  }, 120_000);

  afterAll(async () => {
    await Promise.all(workers.map((worker) => worker.close().catch(() => undefined)));
    await nc?.close();
    await server?.stop();
    await rm(root, { recursive: true, force: true });
  }, 30_000);

  const run = (runId: string, doc: string, file: string): Promise<FollowedRun> => runOneDocument(nc, { runId, doc, source: { uri: `file://${file}` }, pipeline: 'scan', index: 'docs' }, 300_000);

  const stalledBatches = async (): Promise<number> => (await metrics.documentBatchesStalled.get()).values[0]?.value ?? 0;

  it(natsServerAvailable() ? 'OCRs a scan that outlasts the limit page by page without giving its batch up' : NATS_SERVER_MISSING, async () => {
    // A first scan warms the worker's parse thread and OCR models: their loading shows no progress (it is no page), and on a loaded machine may outlast the limit, redelivering the warm-up.
    const warmup = join(root, 'files', 'warmup.tif');
    await scan(warmup, 2);
    expect((await run('progress-warmup', 'warmup', warmup)).events[0]).toMatchObject({ state: 'committed', pages: 2 });
    const stalledBefore = await stalledBatches();
    const linesBefore = log.lines().length;

    const long = join(root, 'files', 'long.tif');
    await scan(long, pages);
    const started = performance.now();
    const followed = await run('progress-long', 'long', long);
    const tookMs = performance.now() - started;

    expect(followed.events).toHaveLength(1);
    expect(followed.events[0]).toMatchObject({ doc: 'long', state: 'committed', pages, ocr_pages: pages });
    expect(followed.end).toMatchObject({ state: 'completed', documents: { ok: 1, failed: 0 } });
    // The batch outlived its stall limit, and was never given up: no stall counted, no warning.
    expect(tookMs).toBeGreaterThan(stallMs);
    expect(await stalledBatches()).toBe(stalledBefore);
    expect(log.lines().slice(linesBefore).filter((line) => typeof line.msg === 'string' && line.msg.includes('showed no progress'))).toEqual([]);
    console.info(`batch progress: ${pages} pages in ${tookMs.toFixed(0)} ms with a stall limit of ${stallMs} ms`);
  }, 360_000);
});
