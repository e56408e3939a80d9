import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { z } from 'zod';
import { connectNats } from '../adapters/nats/connection/connection.js';
import { JobsClient } from '../adapters/nats/jobs/jobs-client.js';
import { createLogger } from '../adapters/observability/logger.js';
import type { Engine } from '../adapters/protocol/engine.js';
import { loadTaxonomyFile, type Taxonomy } from '../adapters/taxonomy/index.js';
import { TaxonomyClassifier, categoryIndex, type ClassifierOptionsInput } from '../pipelines/classify/index.js';
import { loadCatalog } from '../pipelines/inference/catalog.js';
import { InferenceEngine } from '../pipelines/inference/engine.js';
import { JobsEngine } from '../adapters/nats/jobs/jobs-engine.js';
import { productText } from '../services/cli/commands/classify/products.js';
import { resolveWorkerConfig } from '../services/worker/config.js';
import { ShoalWorker } from '../services/worker/worker.js';
import { startNatsServer } from '../test/helpers/nats-server.js';
import { BENCH_MODEL, DATA_DIR, SHARED_DIR } from './lib/corpora.js';
import { percentile, printTable, writeResult, type Row } from './lib/report.js';

/**
 * `shoal classify` speed: the Flipkart products (title + description, as the CLI embeds them by
 * default) into the 10,595 Shopify categories with bench-minilm-l6 (real all-MiniLM-L6-v2
 * geometry, random weights), in the CLI's loop (chunks of 256 products, two in flight):
 *
 * - cache: embedding all category paths into a fresh cache folder (and reading it back);
 * - encode-only: the same product texts through engine.encode as the classifier calls it (the
 *   baseline: retrieval-only / encode-only must stay ≥ 0.9, the category search is not the bottleneck);
 * - retrieve / rerank: TaxonomyClassifier without and with the conformance cross-encoder
 *   (bert-cross-encoder) rescoring the top 20 categories of each product;
 * - the same two via NATS: a private nats-server and one worker (in this process) doing the
 *   encode and score jobs, retrieval in the client (as `shoal classify --nats`).
 *
 * Every configuration runs once per round, rounds interleaved; medians reported.
 *
 *   npx tsx bench/classify.ts [--rounds 3] [--products 1050] [--skip-nats]
 */

const { values: args } = parseArgs({
  options: {
    rounds: { type: 'string', default: '3' },
    products: { type: 'string', default: '1050' },
    'skip-nats': { type: 'boolean', default: false },
    'rerank-top': { type: 'string', default: '20' },
  },
});

const ROUNDS = Number(args.rounds);
const PRODUCTS = Number(args.products);
const RERANK_TOP = Number(args['rerank-top']);
const CHUNK = 256;
const MODEL = 'bench/minilm-l6';
const CROSS = 'bench/cross-encoder';
const CROSS_DIR = join(SHARED_DIR, 'conformance', 'bert-cross-encoder');
const median = (values: readonly number[]): number => percentile(values, 50);

function productTexts(count: number): string[] {
  return readFileSync(join(DATA_DIR, 'products', 'flipkart-1050.jsonl'), 'utf8')
    .split('\n')
    .filter((line) => line.trim() !== '')
    .slice(0, count)
    .map((line) => productText(z.record(z.string(), z.unknown()).parse(JSON.parse(line)), ['title', 'description'], undefined));
}

/** Chunks of CHUNK, two in flight, results consumed in order: the shape of the CLI loop. */
async function pipelined<T>(texts: readonly string[], work: (chunk: readonly string[]) => Promise<T>): Promise<number> {
  const started = performance.now();
  let previous: Promise<unknown> = Promise.resolve();
  for (let at = 0; at < texts.length; at += CHUNK) {
    const running = work(texts.slice(at, at + CHUNK));
    running.catch(() => undefined);
    await previous;
    previous = running;
  }
  await previous;
  return (performance.now() - started) / 1000;
}

async function classifyRun(engine: Engine, taxonomy: Taxonomy, texts: readonly string[], options: ClassifierOptionsInput): Promise<number> {
  const classifier = await TaxonomyClassifier.open(engine, taxonomy, options);
  try {
    return await pipelined(texts, (chunk) => classifier.classify(chunk.map((text) => ({ text }))));
  } finally {
    await classifier.close();
  }
}

async function main(): Promise<void> {
  const work = mkdtempSync(join(tmpdir(), 'shoal-classify-bench-'));
  const catalogFile = join(work, 'catalog.json');
  writeFileSync(catalogFile, JSON.stringify({ models: { [MODEL]: { source: BENCH_MODEL }, [CROSS]: { source: CROSS_DIR } } }));
  const taxonomy = await loadTaxonomyFile(join(DATA_DIR, 'taxonomy', 'shopify-categories.txt'));
  const texts = productTexts(PRODUCTS);
  const engine = new InferenceEngine({ catalog: await loadCatalog(catalogFile), preload: [MODEL, CROSS] });
  const server = args['skip-nats'] ? null : await startNatsServer();
  const worker =
    server === null
      ? null
      : await ShoalWorker.start(
          resolveWorkerConfig({ nats: { servers: [server.url] }, topology: { prefix: 'bench' }, engine: { catalog: catalogFile }, models: [MODEL, CROSS], preload: [MODEL, CROSS] }),
          { logger: createLogger('bench', 'warn') },
        );
  const nc = server === null ? null : await connectNats({ servers: [server.url], retryFirstConnect: false });
  const remote = nc === null ? null : new JobsEngine(null, await JobsClient.open(nc, { topology: { prefix: 'bench' } }));
  const cacheDir = join(work, 'cache');
  const rows: Row[] = [];
  try {
    await engine.start();
    // Warm-up: both models loaded and run once here and on the worker.
    await engine.encode({ model: MODEL, items: ['warm'] });
    await engine.score({ model: CROSS, query: 'warm', items: ['up'] });
    const retrieve = { model: MODEL, cacheDir };
    const rerank = { model: MODEL, cacheDir, rerankModel: CROSS, rerankTop: RERANK_TOP };
    for (let round = 1; round <= ROUNDS; round++) {
      // Round 1 builds the cache every later run reads; later rounds build into a fresh folder.
      const fresh = round === 1 ? cacheDir : join(work, `fresh-${round}`);
      const build = await categoryIndex(engine, taxonomy, { model: MODEL, template: '{path}', role: 'document' }, fresh);
      const load = await categoryIndex(engine, taxonomy, { model: MODEL, template: '{path}', role: 'document' }, fresh);
      if (round === 1 && remote !== null) await classifyRun(remote, taxonomy, texts.slice(0, 8), { model: MODEL, rerankModel: CROSS, cacheDir });
      if (round > 1) rmSync(fresh, { recursive: true, force: true });
      // Alternate the order of the two configurations compared by the ratio.
      const encodeOnly = (): Promise<number> => pipelined(texts, (chunk) => engine.encode({ model: MODEL, items: [...chunk], output_types: ['dense'], role: 'query', priority: 'bulk' }));
      let encodeSeconds: number;
      let retrieveSeconds: number;
      if (round % 2 === 1) {
        encodeSeconds = await encodeOnly();
        retrieveSeconds = await classifyRun(engine, taxonomy, texts, retrieve);
      } else {
        retrieveSeconds = await classifyRun(engine, taxonomy, texts, retrieve);
        encodeSeconds = await encodeOnly();
      }
      const rerankSeconds = await classifyRun(engine, taxonomy, texts, rerank);
      const natsRetrieve = remote === null ? Number.NaN : await classifyRun(remote, taxonomy, texts, retrieve);
      const natsRerank = remote === null ? Number.NaN : await classifyRun(remote, taxonomy, texts, rerank);
      const row: Row = {
        round,
        'cache build s': build.seconds,
        'cache load s': load.seconds,
        'encode-only p/s': texts.length / encodeSeconds,
        'retrieve p/s': texts.length / retrieveSeconds,
        'retrieve/encode': encodeSeconds / retrieveSeconds,
        [`rerank@${RERANK_TOP} p/s`]: texts.length / rerankSeconds,
        'nats retrieve p/s': texts.length / natsRetrieve,
        [`nats rerank@${RERANK_TOP} p/s`]: texts.length / natsRerank,
      };
      rows.push(row);
      console.error(`round ${round}: ${JSON.stringify(row)}`);
    }
    const medianRow: Row = { round: 'median' };
    for (const key of Object.keys(rows[0] ?? {})) if (key !== 'round') medianRow[key] = median(rows.map((r) => Number(r[key])));
    const table = [...rows, medianRow];
    const title = `${texts.length} Flipkart products × ${taxonomy.categories.length} Shopify categories, bench-minilm-l6${remote === null ? '' : ', NATS: one worker in this process'} (products/s)`;
    printTable(title, table);
    const ratio = Number(medianRow['retrieve/encode']);
    console.log(`\nretrieval-only / encode-only (median of ${ROUNDS} rounds): ${ratio.toFixed(3)} — target ≥ 0.9: ${ratio >= 0.9 ? 'met' : 'NOT met'}`);
    const file = writeResult('classify', { command: `npx tsx bench/classify.ts --rounds ${ROUNDS} --products ${PRODUCTS}${args['skip-nats'] ? ' --skip-nats' : ''}`, model: BENCH_MODEL, rerankModel: CROSS_DIR, rerankTop: RERANK_TOP, categories: taxonomy.categories.length, products: texts.length, ratioMedian: ratio, table });
    console.log(`\nwrote ${file}`);
  } finally {
    await nc?.close();
    await worker?.drain();
    await server?.stop();
    await engine.close();
    rmSync(work, { recursive: true, force: true });
  }
}

await main();
