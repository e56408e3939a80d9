import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { z } from 'zod';
import { ClassifyJobAccepted, ClassifyResult, ClassifyRunStatus, Classification } from '../adapters/protocol/classify.js';
import { loadCatalog } from '../pipelines/inference/catalog.js';
import { InferenceEngine } from '../pipelines/inference/engine.js';
import { productText } from '../services/cli/commands/classify/products.js';
import { BENCH_MODEL, DATA_DIR } from './lib/corpora.js';
import { benchGateway } from './lib/gateway.js';
import { printTable, writeResult, type Row } from './lib/report.js';

/**
 * `POST /v1/classify` in its two forms on one in-process gateway (no network, `app.inject`): the
 * Flipkart products (title + description) into the 10,595 Shopify categories with bench-minilm-l6.
 *
 * - job, cold: one request of every product (202), polled to completed; the run embeds the
 *   categories into a fresh disk cache;
 * - job, cached: the same request again under a new job id; categories read from the cache;
 * - sync: the products in requests of the sync limit (256), one after another, category matrix
 *   already in the gateway's memory (a warm-up request built it).
 *
 * The job's lines are checked against the synchronous answers (same categories).
 *
 *   npx tsx bench/classify-http.ts [--products 1050]
 */

const { values: args } = parseArgs({ options: { products: { type: 'string', default: '1050' } } });
const PRODUCTS = Number(args.products);
const MODEL = 'bench/minilm-l6';
const SYNC = 256;

function products(count: number): Array<{ id: string; text: string }> {
  return readFileSync(join(DATA_DIR, 'products', 'flipkart-1050.jsonl'), 'utf8')
    .split('\n')
    .filter((line) => line.trim() !== '')
    .slice(0, count)
    .map((line, at) => ({ id: `p${at}`, text: productText(z.record(z.string(), z.unknown()).parse(JSON.parse(line)), ['title', 'description'], undefined) }));
}

async function main(): Promise<void> {
  const work = mkdtempSync(join(tmpdir(), 'shoal-classify-http-bench-'));
  const catalogFile = join(work, 'catalog.json');
  writeFileSync(catalogFile, JSON.stringify({ models: { [MODEL]: { source: BENCH_MODEL } } }));
  const engine = new InferenceEngine({ catalog: await loadCatalog(catalogFile), preload: [MODEL] });
  const app = benchGateway(engine, { classify: { syncItems: SYNC, resultsDir: join(work, 'results'), cacheDir: join(work, 'cache') } });
  const taxonomy = readFileSync(join(DATA_DIR, 'taxonomy', 'shopify-categories.txt'), 'utf8');
  const items = products(PRODUCTS);
  const rows: Row[] = [];
  try {
    await engine.start();
    await engine.encode({ model: MODEL, items: ['warm'] });

    const job = async (jobId: string): Promise<{ seconds: number; lines: Classification[] }> => {
      const started = performance.now();
      const response = await app.inject({ method: 'POST', url: '/v1/classify', payload: { model: MODEL, items, taxonomy, job_id: jobId } });
      if (response.statusCode !== 202) throw new Error(`job answered ${response.statusCode}: ${response.body.slice(0, 300)}`);
      const { job_id: id } = ClassifyJobAccepted.parse(response.json());
      for (;;) {
        const status = ClassifyRunStatus.extend({ links: z.unknown() }).parse((await app.inject({ method: 'GET', url: `/v1/jobs/${id}` })).json());
        if (status.state === 'failed') throw new Error(`job failed: ${JSON.stringify(status.error)}`);
        if (status.state === 'completed') break;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      const seconds = (performance.now() - started) / 1000;
      const body = (await app.inject({ method: 'GET', url: `/v1/jobs/${id}/results` })).body;
      return { seconds, lines: body.split('\n').filter((line) => line !== '').map((line) => Classification.parse(JSON.parse(line))) };
    };

    const cold = await job('bench-cold');
    rows.push({ form: 'job, categories embedded', products: items.length, seconds: cold.seconds.toFixed(2), 'products/s': Math.round(items.length / cold.seconds) });
    const cached = await job('bench-cached');
    rows.push({ form: 'job, categories cached', products: items.length, seconds: cached.seconds.toFixed(2), 'products/s': Math.round(items.length / cached.seconds) });

    // Warm-up: the synchronous path builds its in-memory matrix once.
    await app.inject({ method: 'POST', url: '/v1/classify', payload: { model: MODEL, items: items.slice(0, 1), taxonomy } });
    const started = performance.now();
    const sync: Classification[] = [];
    for (let at = 0; at < items.length; at += SYNC) {
      const response = await app.inject({ method: 'POST', url: '/v1/classify', payload: { model: MODEL, items: items.slice(at, at + SYNC), taxonomy } });
      if (response.statusCode !== 200) throw new Error(`sync answered ${response.statusCode}: ${response.body.slice(0, 300)}`);
      sync.push(...ClassifyResult.parse(response.json()).items);
    }
    const syncSeconds = (performance.now() - started) / 1000;
    rows.push({ form: `sync, ${SYNC} per request`, products: items.length, seconds: syncSeconds.toFixed(2), 'products/s': Math.round(items.length / syncSeconds) });

    const same = cached.lines.filter((line, at) => line.id === sync[at]?.id && line.category.id === sync[at]?.category.id).length;
    printTable(`POST /v1/classify, ${items.length} products x Shopify categories, ${MODEL} (job lines equal to sync: ${same}/${items.length})`, rows);
    writeResult('classify-http', { products: items.length, rows, same_category_as_sync: same });
  } finally {
    await app.close();
    await engine.close();
    rmSync(work, { recursive: true, force: true });
  }
}

await main();
