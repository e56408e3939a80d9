import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { z } from 'zod';
import { LanceDbStore, VECTOR_INDEX_MIN_ROWS } from '../adapters/stores/lancedb/store.js';
import type { ChunkRow, DocumentState } from '../adapters/stores/store.js';
import { encodeDense } from '../pipelines/documents/stages/encode.js';
import { InferenceEngine } from '../pipelines/inference/engine.js';
import { engineOptionsFromEnv } from '../services/settings/engine-settings.js';
import { BENCH_MODEL, DATA_DIR } from './lib/corpora.js';
import { readRealChunks } from './lib/real-chunks-cache.js';
import { percentile, printTable, writeResult, type Row } from './lib/report.js';
import { exactTopK, inverseNorms, meanNearestCosine, seededRandom, shapedVectors } from './lib/vector-sets.js';

/**
 * Where LanceDB's IVF-PQ index starts to pay (VECTOR_INDEX_MIN_ROWS in adapters/stores/lancedb/store.ts):
 * per table size, the same rows searched by LanceDB's exact flat scan and through the IVF-PQ
 * index Shoal builds (optimize(), its codes and search settings), each through `store.search`
 * (k = 10, what `shoal search` and the gateway call): recall@10 against brute-force cosine, p50
 * / p99 latency, and the time the index build adds to the run that crosses the threshold.
 *
 * Rows as in bench/search.ts: real SciFact chunks encoded by bench-minilm-l6 (read from the
 * `--cache` folder a `bench/search.ts --real N --cache DIR` run left) and, past them, synthetic
 * rows with the real rows' own covariance (vector-sets.ts shapedVectors). Queries: SciFact claims.
 *
 *   npx tsx bench/lance-index-threshold.ts --cache /tmp/shoal-search-cache [--real 2000]
 *     [--sizes 10000,20000,50000] [--queries 100] [--out FILE]
 */

const { values: args } = parseArgs({
  options: {
    cache: { type: 'string' },
    real: { type: 'string', default: '2000' },
    sizes: { type: 'string', default: '10000,20000,50000' },
    queries: { type: 'string', default: '100' },
    out: { type: 'string' },
  },
});
const REAL = z.coerce.number().int().positive().parse(args.real);
const SIZES = args.sizes.split(',').map((size) => z.coerce.number().int().min(1000).parse(size));
const QUERIES = z.coerce.number().int().positive().parse(args.queries);
const K = 10;
const SEED = 7;
const COMMIT_ROWS = 20_000;
/** The chunk size of the cached chunks (bench/search.ts's default `--chunk-tokens`). */
const CHUNK_TOKENS = 128;

const Claim = z.looseObject({ text: z.string() });

function realRows(): { texts: string[]; vectors: Float32Array; dim: number } {
  const cached = args.cache === undefined ? null : readRealChunks(args.cache, REAL, CHUNK_TOKENS);
  if (cached === null) {
    throw new Error(`no encoded SciFact chunks: run \`npx tsx bench/search.ts --rows 10000 --backends lancedb --rounds 1 --real ${REAL} --cache DIR\` once, then pass --cache DIR`);
  }
  return { texts: cached.chunks.map((chunk) => chunk.text), vectors: cached.vectors, dim: cached.dim };
}

interface Measured {
  rows: number;
  search: 'flat scan' | 'IVF-PQ';
  buildSeconds: number;
  recallAt10: number;
  p50: number;
  p99: number;
}

async function measure(rows: number, indexed: boolean, set: { texts: string[]; vectors: Float32Array; dim: number }, queries: Float32Array[], truths: Set<string>[]): Promise<Measured> {
  const dir = mkdtempSync(join(tmpdir(), 'shoal-bench-threshold-'));
  // The flat side never reaches its threshold; the indexed side builds its index at the first optimize().
  const store = new LanceDbStore({ dir, vectorIndexMinRows: indexed ? 1 : Number.MAX_SAFE_INTEGER });
  const { dim, vectors, texts } = set;
  try {
    await store.prepare({ dimension: dim, distance: 'cosine', optionalColumns: [], metadata: { model: BENCH_MODEL } });
    for (let start = 0; start < rows; start += COMMIT_ROWS) {
      const chunks: ChunkRow[] = [];
      const states: DocumentState[] = [];
      for (let at = start; at < Math.min(rows, start + COMMIT_ROWS); at++) {
        const source = `bench://block-${Math.floor(at / 100)}`;
        chunks.push({ id: `row-${at}`, document_id: source, source, page: 1, chunk: at, text: texts[at % texts.length] ?? '', start: 0, end: 0, heading: null, settings: 'bench', vector: vectors.subarray(at * dim, (at + 1) * dim), entities: null, labels: null, ingested_at: '2026-01-01T00:00:00Z' });
        if (at % 100 === 0) states.push({ source, document_id: source, settings: 'bench', chunks: 100, pages: 1, ingested_at: '2026-01-01T00:00:00Z' });
      }
      await store.commit(chunks, states);
    }
    const started = performance.now();
    await store.optimize();
    const buildSeconds = (performance.now() - started) / 1000;
    for (const query of queries.slice(0, 10)) await store.search(query, { k: K });
    let found = 0;
    const latencies: number[] = [];
    for (const [i, query] of queries.entries()) {
      const begun = performance.now();
      const hits = await store.search(query, { k: K });
      latencies.push(performance.now() - begun);
      found += hits.filter((hit) => truths[i]?.has(hit.row.id) === true).length;
    }
    return { rows, search: indexed ? 'IVF-PQ' : 'flat scan', buildSeconds: Math.round(buildSeconds * 10) / 10, recallAt10: Math.round((found / (queries.length * K)) * 1000) / 1000, p50: Math.round(percentile(latencies, 50) * 10) / 10, p99: Math.round(percentile(latencies, 99) * 10) / 10 };
  } finally {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

async function main(): Promise<void> {
  const real = realRows();
  const maxRows = Math.max(...SIZES);
  const nearest = meanNearestCosine(real.vectors, real.texts.length, real.dim, 200, seededRandom(SEED + 1));
  const { vectors } = shapedVectors(real.vectors, real.texts.length, real.dim, maxRows, nearest, SEED);
  const norms = inverseNorms(vectors, maxRows, real.dim);
  const engine = new InferenceEngine(engineOptionsFromEnv(process.env));
  const claims = readFileSync(join(DATA_DIR, 'scifact', 'queries.jsonl'), 'utf8')
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => Claim.parse(JSON.parse(line)).text);
  const queries = (await encodeDense(engine, claims.slice(0, QUERIES), { model: BENCH_MODEL, role: 'query' })).map((vector) => Float32Array.from(vector));
  await engine.close();
  const set = { texts: real.texts, vectors, dim: real.dim };
  const results: Measured[] = [];
  for (const rows of SIZES) {
    const truths = queries.map((query) => new Set(exactTopK(vectors, norms, rows, real.dim, query, K).map((row) => `row-${row}`)));
    for (const indexed of [false, true]) {
      const result = await measure(rows, indexed, set, queries, truths);
      console.error(`${rows} rows, ${result.search}: recall@10 ${result.recallAt10}, p50 ${result.p50} ms, p99 ${result.p99} ms, index build ${result.buildSeconds} s`);
      results.push(result);
    }
  }
  const rowsOut: Row[] = results.map((m) => ({ rows: m.rows, search: m.search, 'recall@10': m.recallAt10, 'store.search p50 ms': m.p50, 'p99 ms': m.p99, 'index build s': m.buildSeconds }));
  printTable(`LanceDB: flat scan vs IVF-PQ (store.search, k ${K}; Shoal builds the index from ${VECTOR_INDEX_MIN_ROWS.toLocaleString('en-US')} rows)`, rowsOut);
  const file = writeResult('lance-index-threshold', { command: `npx tsx bench/lance-index-threshold.ts ${process.argv.slice(2).join(' ')}`.trim(), model: BENCH_MODEL, real: real.texts.length, queries: queries.length, indexMinRows: VECTOR_INDEX_MIN_ROWS, results }, args.out);
  console.log(`wrote ${file}`);
}

await main();
