import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { z } from 'zod';
import { pgTableNames } from '../adapters/stores/pgvector/sql.js';
import { DEFAULT_EF_SEARCH, HNSW_INDEX_MIN_ROWS } from '../adapters/stores/pgvector/store.js';
import { DEFAULT_HNSW_BUILD } from '../adapters/stores/pgvector/hnsw-defaults.js';
import { VECTOR_INDEX_MIN_ROWS } from '../adapters/stores/lancedb/store.js';
import { openIndexUri } from '../adapters/stores/open.js';
import type { ChunkRow, DocumentState, Store, TableSpec } from '../adapters/stores/store.js';
import { chunkPages, engineTokenCounter } from '../pipelines/documents/chunk.js';
import { searchIndex } from '../pipelines/documents/search.js';
import { encodeDense } from '../pipelines/documents/stages/encode.js';
import { InferenceEngine } from '../pipelines/inference/engine.js';
import { engineOptionsFromEnv } from '../services/settings/engine-settings.js';
import { startPgliteServer, type PgliteServerHandle } from '../test/helpers/pglite-server.js';
import { BENCH_MODEL, DATA_DIR, SHARED_DIR } from './lib/corpora.js';
import { benchGateway } from './lib/gateway.js';
import { machine, percentile, printTable, type Row } from './lib/report.js';
import { readRealChunks, writeRealChunks, type RealChunk } from './lib/real-chunks-cache.js';
import { clusteredVectors, exactTopK, inverseNorms, meanNearestCosine, seededRandom, shapedVectors } from './lib/vector-sets.js';

/**
 * Search at scale (issue 41, item 2): indexes of 10k, 100k and 1M rows of 384-d vectors built
 * with Shoal's own stores (Store.prepare/commit, then optimize(): LanceDB builds IVF-PQ and
 * pgvector HNSW from 100,000 rows, below that both scan exactly), then per index:
 * - build time: the writes (commit) and the ANN index (optimize) apart;
 * - recall@10 of store.search against brute-force cosine over the same vectors in this process,
 *   for `--recall-queries` SciFact claims;
 * - latency, medians over `--rounds` interleaved rounds of each round's p50/p99: in process
 *   (searchIndex with the real engine: the query is encoded by the index's model, included) and
 *   POST /v1/search on a listening gateway (same process, the index kept open by its index pool)
 *   at 1, 8 and 32 concurrent clients without rerank, and at 1 client with the conformance
 *   cross-encoder as reranker (50 candidates per query).
 *
 * Rows: SciFact abstracts chunked by Shoal's chunker (`--chunk-tokens`) and encoded by the engine
 * with bench-minilm-l6 (random weights: the geometry of all-MiniLM-L6-v2, not its meaning), the
 * first `--real` of them; past that, clustered gaussian rows around real ones (vector-sets.ts),
 * each with its centroid's text: `--noise shaped` (default) draws the noise with the real rows'
 * own covariance, `--noise isotropic` in every direction alike (an ANN index's worst case: most
 * of that noise lies where real embeddings have no variance, vector-sets.ts shapedVectors). The table spec records the model's absolute folder as ingest
 * does, so search encodes queries with it. pgvector runs on PGlite (PostgreSQL 18 + pgvector
 * compiled to WebAssembly, single-threaded, in this process): not a production PostgreSQL; or,
 * with `--pg-url postgres://user@host:port/db`, on a real server with the vector extension (the
 * bench's tables there are dropped before and after; its version and index-build settings are
 * recorded; no row limit unless `--pg-max-rows`).
 *
 *   npx tsx bench/search.ts [--rows 10000,100000,1000000] [--backends lancedb,pgvector] [--rounds 3]
 *     [--out bench/measured/search-scale.json] [--pg-max-rows 10000] [--pg-url URL] [--cache DIR] [--baseline EARLIER.json]
 *     [--noise shaped|isotropic] [--pg-ef-search 100,400,1000] [--pg-hnsw 16:64,16:200]
 *
 * `--cache DIR` keeps the encoded real chunks between runs (encoding 10,000 chunks takes minutes);
 * `--baseline` takes the 100k LanceDB latencies of an earlier run's JSON for the 1M growth verdict
 * when this run measures 1M alone. A failed HTTP search (a store's pool timing out under load) is
 * counted per setting, not fatal; the JSON is written after every index.
 */

const { values: args } = parseArgs({
  options: {
    rows: { type: 'string', default: '10000,100000' },
    backends: { type: 'string', default: 'lancedb,pgvector' },
    rounds: { type: 'string', default: '3' },
    queries: { type: 'string', default: '100' },
    requests: { type: 'string', default: '200' },
    'recall-queries': { type: 'string', default: '100' },
    real: { type: 'string', default: '12000' },
    'chunk-tokens': { type: 'string', default: '128' },
    'pg-max-rows': { type: 'string' },
    'pg-url': { type: 'string' },
    'pg-ef-search': { type: 'string' },
    'pg-hnsw': { type: 'string' },
    /** An earlier run's JSON whose LanceDB 100k result the 1M growth is measured against when this run has none (said so in the verdict). */
    baseline: { type: 'string' },
    /** How synthetic rows deviate from their real centroid: `shaped` (the real rows' own covariance) or `isotropic` (vector-sets.ts says why both). */
    noise: { type: 'string', default: 'shaped' },
    cache: { type: 'string' },
    out: { type: 'string' },
  },
});

const SIZES = args.rows.split(',').map((size) => z.coerce.number().int().positive().parse(size));
const BACKENDS = args.backends.split(',').map((backend) => z.enum(['lancedb', 'pgvector']).parse(backend));
const ROUNDS = Number(args.rounds);
const QUERIES = Number(args.queries);
const REQUESTS = Number(args.requests);
const RECALL_QUERIES = Number(args['recall-queries']);
const REAL_WANTED = Number(args.real);
const CHUNK_TOKENS = Number(args['chunk-tokens']);
/** An external PostgreSQL with pgvector (`postgres://user@host:port/db`) instead of PGlite; its bench tables are dropped before and after. */
const PG_URL = args['pg-url'];
/** pgvector only: after the main measurement, recall@10 and store.search latency at each `hnsw.ef_search` (the URI's `ef_search`). */
const PG_EF_SEARCH = (args['pg-ef-search'] ?? '').split(',').filter((v) => v !== '').map((v) => z.coerce.number().int().min(1).max(1_000).parse(v));
/**
 * pgvector only, from 100,000 rows: after the main measurement, the HNSW index rebuilt with each
 * `m:ef_construction` build (the URI's hnsw_m, hnsw_ef_construction), its build time, and recall@10
 * and store.search latency at each `--pg-ef-search` (Shoal's default ef_search when none).
 */
const PG_HNSW = (args['pg-hnsw'] ?? '').split(',').filter((v) => v !== '').map((v) => {
  const [m, efConstruction] = v.split(':').map((n) => z.coerce.number().int().min(2).max(1_000).parse(n));
  if (m === undefined || efConstruction === undefined) throw new Error(`--pg-hnsw takes m:ef_construction pairs, not ${v}`);
  return { m, efConstruction };
});
const PG_MAX_ROWS = Number(args['pg-max-rows'] ?? (PG_URL === undefined ? 10_000 : Number.POSITIVE_INFINITY));
const NOISE = z.enum(['shaped', 'isotropic']).parse(args.noise);
const K = 10;
const CLIENTS = [1, 8, 32] as const;
const MODEL = resolve(BENCH_MODEL);
const RERANKER = resolve(join(SHARED_DIR, 'conformance', 'bert-cross-encoder'));
const SEED = 41;
/** Rows per commit call: one synthetic "document" each, so a commit deletes stale rows of one source only. */
const COMMIT_ROWS = 20_000;

const Doc = z.looseObject({ _id: z.string(), title: z.string(), text: z.string() });
const Claim = z.looseObject({ text: z.string() });

function jsonl<T>(path: string, schema: z.ZodType<T>): T[] {
  return readFileSync(path, 'utf8').split('\n').filter((line) => line.trim() !== '').map((line) => schema.parse(JSON.parse(line)));
}

const median = (values: readonly number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? (sorted[mid] ?? Number.NaN) : ((sorted[mid - 1] ?? Number.NaN) + (sorted[mid] ?? Number.NaN)) / 2;
};
const round1 = (value: number): number => Math.round(value * 10) / 10;
const round3 = (value: number): number => Math.round(value * 1000) / 1000;
const load = (): number[] => loadavg().map((value) => round1(value));

interface RealSet {
  chunks: RealChunk[];
  vectors: Float32Array;
  dim: number;
  encodeSeconds: number;
  tokens: number;
}

/** SciFact abstracts chunked and encoded (role document) by the engine; read from `--cache` when an earlier run left them. */
async function realSet(engine: InferenceEngine): Promise<RealSet> {
  const cached = args.cache === undefined ? null : readRealChunks(args.cache, REAL_WANTED, CHUNK_TOKENS);
  if (cached !== null) {
    console.log(`real rows: ${cached.chunks.length} from the cache ${args.cache}`);
    return { ...cached, encodeSeconds: Number.NaN, tokens: Number.NaN };
  }
  const count = engineTokenCounter(engine, MODEL);
  const chunks: RealChunk[] = [];
  let tokens = 0;
  for (const doc of jsonl(join(DATA_DIR, 'scifact', 'corpus.jsonl'), Doc)) {
    if (chunks.length >= REAL_WANTED) break;
    const pieces = await chunkPages([{ page: 1, text: `${doc.title}\n\n${doc.text}`, ocr: false }], { size: CHUNK_TOKENS, overlap: 0 }, count);
    for (const piece of pieces) {
      if (chunks.length >= REAL_WANTED) break;
      chunks.push({ id: `${doc._id}#${piece.index}`, documentId: doc._id, chunk: piece.index, text: piece.text, start: piece.start, end: piece.end });
      tokens += piece.tokens;
    }
  }
  const started = performance.now();
  const encoded = await encodeDense(engine, chunks.map((chunk) => chunk.text), { model: MODEL, role: 'document' });
  const encodeSeconds = (performance.now() - started) / 1000;
  const dim = encoded[0]?.length ?? 0;
  const vectors = new Float32Array(chunks.length * dim);
  encoded.forEach((vector, at) => vectors.set(vector, at * dim));
  console.log(`real rows: ${chunks.length} SciFact chunks (${tokens} tokens) encoded in ${encodeSeconds.toFixed(1)} s`);
  if (args.cache !== undefined) writeRealChunks(args.cache, REAL_WANTED, CHUNK_TOKENS, chunks, vectors);
  return { chunks, vectors, dim, encodeSeconds, tokens };
}

/** The rows past the real ones, with the noise `--noise` names (bench/lib/vector-sets.ts). */
function syntheticSet(real: RealSet, total: number, nearest: number): { vectors: Float32Array; centroids: Int32Array; description: string; noiseScale: number } {
  const count = real.chunks.length;
  if (NOISE === 'isotropic') {
    const { vectors, centroids, sigma } = clusteredVectors(real.vectors, count, real.dim, total, nearest, SEED);
    return { vectors, centroids, noiseScale: sigma, description: `clustered gaussian rows: a random real row as centroid plus isotropic noise (σ = ${sigma.toFixed(4)} per dimension)` };
  }
  const { vectors, centroids, scale } = shapedVectors(real.vectors, count, real.dim, total, nearest, SEED);
  return { vectors, centroids, noiseScale: scale, description: 'clustered gaussian rows: a random real row as centroid plus noise with the real rows\' own covariance (a gaussian combination of 32 random real rows\' deviations from their mean)' };
}

/** Row `at` of the set as stored: a real chunk, or a synthetic row carrying its centroid's text in a block "document". */
function chunkRow(at: number, real: RealSet, centroids: Int32Array, vectors: Float32Array, ingestedAt: string): ChunkRow {
  const realCount = real.chunks.length;
  const own = at < realCount ? real.chunks[at] : undefined;
  const centroid = own ?? real.chunks[centroids[at - realCount] ?? 0];
  const block = Math.floor((at - realCount) / COMMIT_ROWS);
  return {
    id: own?.id ?? `synthetic-${at}`,
    document_id: own?.documentId ?? `synthetic-block-${block}`,
    source: own === undefined ? `synthetic://block-${block}` : `scifact://${own.documentId}`,
    page: 1,
    chunk: own?.chunk ?? at,
    text: centroid?.text ?? '',
    start: centroid?.start ?? 0,
    end: centroid?.end ?? 0,
    heading: null,
    settings: 'bench-search-scale',
    vector: vectors.subarray(at * real.dim, (at + 1) * real.dim),
    entities: null,
    labels: null,
    ingested_at: ingestedAt,
    metadata: null,
  };
}

interface Build {
  writeSeconds: number;
  indexSeconds: number;
  index: string;
}

/** Writes the first `rows` rows through the store (commit calls of COMMIT_ROWS, one state per source), then optimize(). */
async function build(store: Store, backend: string, uri: string, rows: number, real: RealSet, centroids: Int32Array, vectors: Float32Array): Promise<Build> {
  const spec: TableSpec = { dimension: real.dim, distance: 'cosine', vectorType: 'float32', optionalColumns: [], metadata: { model: MODEL, pipeline: 'bench-search-scale' } };
  const ingestedAt = new Date().toISOString();
  const started = performance.now();
  await store.prepare(spec);
  for (let from = 0; from < rows; from += COMMIT_ROWS) {
    const batch: ChunkRow[] = [];
    for (let at = from; at < Math.min(rows, from + COMMIT_ROWS); at++) batch.push(chunkRow(at, real, centroids, vectors, ingestedAt));
    const states = new Map<string, DocumentState>();
    for (const row of batch) {
      const state = states.get(row.source);
      if (state === undefined) states.set(row.source, { source: row.source, document_id: row.document_id, settings: row.settings, chunks: 1, pages: 1, ingested_at: ingestedAt });
      else state.chunks += 1;
    }
    await store.commit(batch, [...states.values()]);
    if (from % 100_000 === 0 && from > 0) console.log(`  ${backend}: ${from} rows written, ${((performance.now() - started) / 1000).toFixed(0)} s`);
  }
  const written = performance.now();
  await store.optimize();
  const done = performance.now();
  const hnsw = hnswOf(uri);
  // Each store's own threshold (LanceDB builds from 20k rows, pgvector from 100k), as the table was built.
  const index = rows < (backend === 'lancedb' ? VECTOR_INDEX_MIN_ROWS : HNSW_INDEX_MIN_ROWS) ? 'none (exact scan)' : backend === 'lancedb' ? 'IVF-PQ (4-d PQ codes, √rows partitions; nprobes 40, refine 4)' : `HNSW (m ${hnsw.m}, ef_construction ${hnsw.efConstruction}; ef_search ${DEFAULT_EF_SEARCH}, Shoal's default)`;
  return { writeSeconds: round1((written - started) / 1000), indexSeconds: round1((done - written) / 1000), index };
}

const SearchResponse = z.looseObject({ hits: z.array(z.looseObject({ id: z.string() })) });

/** Latencies (ms) of the calls that answered, and the failures by message (an overloaded store answers 503: counted, not fatal). */
interface Timed {
  latencies: number[];
  failures: Record<string, number>;
}

interface Setting {
  name: string;
  run: (claims: readonly string[]) => Promise<Timed>;
}

/** Sends `claims` as searches from `clients` concurrent callers; the latency of each (ms). */
async function httpLoad(address: string, index: string, claims: readonly string[], clients: number, rerank: string | undefined): Promise<Timed> {
  const latencies: number[] = [];
  const failures: Record<string, number> = {};
  let next = 0;
  const client = async (): Promise<void> => {
    for (let at = next++; at < claims.length; at = next++) {
      const started = performance.now();
      const response = await fetch(`${address}/v1/search`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ index, query: claims[at], k: K, ...(rerank === undefined ? {} : { rerank }) }),
      });
      const text = await response.text();
      if (response.status !== 200) {
        const reason = `${response.status}: ${text.slice(0, 200)}`;
        failures[reason] = (failures[reason] ?? 0) + 1;
        continue;
      }
      const hits = SearchResponse.parse(JSON.parse(text)).hits;
      latencies.push(performance.now() - started);
      if (hits.length !== K) throw new Error(`/v1/search gave ${hits.length} hits, not ${K}`);
    }
  };
  await Promise.all(Array.from({ length: clients }, client));
  return { latencies, failures };
}

const failedCount = (failures: Record<string, number> | undefined): number => Object.values(failures ?? {}).reduce((sum, n) => sum + n, 0);

interface EfSearchPoint {
  efSearch: number;
  recallAt10: number;
  p50: number;
  p99: number;
}

/** One HNSW build of `--pg-hnsw`: its time and its recall/latency per ef_search. */
interface HnswPoint {
  m: number;
  efConstruction: number;
  buildSeconds: number;
  efSearch: EfSearchPoint[];
}

/** The HNSW build parameters an index URI asks for (pgvector's defaults where it says none). */
function hnswOf(uri: string): { m: number; efConstruction: number } {
  const query = new URLSearchParams(uri.split('?')[1] ?? '');
  return { m: Number(query.get('hnsw_m') ?? DEFAULT_HNSW_BUILD.m), efConstruction: Number(query.get('hnsw_ef_construction') ?? DEFAULT_HNSW_BUILD.efConstruction) };
}

interface Measured {
  backend: string;
  /** pgvector with `--pg-hnsw`: the index rebuilt with each build, measured per ef_search. */
  hnsw?: HnswPoint[];
  /** pgvector with `--pg-ef-search`: recall and store.search latency per ef_search. */
  efSearch?: EfSearchPoint[];
  rows: number;
  real: number;
  build: Build;
  recallAt10: number;
  recallQueries: number;
  /** Per setting: medians over rounds of each round's p50 and p99 (ms), and every round's figures. */
  latency: Record<string, { p50: number; p99: number; failed: number; rounds: { p50: number; p99: number; n: number; failures: Record<string, number> }[] }>;
  load: number[];
}

async function measure(engine: InferenceEngine, backend: string, uri: string, rows: number, real: RealSet, centroids: Int32Array, vectors: Float32Array, norms: Float64Array, claims: readonly string[], queryVectors: readonly Float32Array[]): Promise<Measured> {
  const { store } = openIndexUri(uri);
  const app = benchGateway(engine, { indexes: { bench: uri } });
  try {
    console.log(`${backend} ${rows} rows: building (load ${load().join(' ')})`);
    const built = await build(store, backend, uri, rows, real, centroids, vectors);
    console.log(`  write ${built.writeSeconds} s, index ${built.indexSeconds} s (${built.index})`);

    const truths = queryVectors.map((query) => new Set(exactTopK(vectors, norms, rows, real.dim, query, K).map((row) => chunkRow(row, real, centroids, vectors, '').id)));
    const recallOf = async (searched: Store): Promise<number> => {
      let found = 0;
      for (const [at, query] of queryVectors.entries()) {
        const hits = await searched.search(Array.from(query), { k: K });
        found += hits.filter((hit) => truths[at]?.has(hit.row.id) === true).length;
      }
      return round3(found / (queryVectors.length * K));
    };
    const recallAt10 = await recallOf(store);
    console.log(`  recall@10 ${recallAt10} over ${queryVectors.length} queries`);
    /** Recall@10 and store.search p50/p99 (the second of two passes) at each ef_search. */
    const sweep = async (efs: readonly number[]): Promise<EfSearchPoint[]> => {
      const points: EfSearchPoint[] = [];
      for (const ef of efs) {
        const { store: tuned } = openIndexUri(`${uri}&ef_search=${ef}`);
        try {
          const recall = await recallOf(tuned);
          const times: number[] = [];
          for (let round = 0; round < 2; round++) {
            for (const query of queryVectors) {
              const started = performance.now();
              await tuned.search(Array.from(query), { k: K });
              if (round === 1) times.push(performance.now() - started);
            }
          }
          const point = { efSearch: ef, recallAt10: recall, p50: round1(percentile(times, 50)), p99: round1(percentile(times, 99)) };
          points.push(point);
          console.log(`  ef_search ${ef}: recall@10 ${point.recallAt10}, store.search p50 ${point.p50} p99 ${point.p99} ms`);
        } finally {
          await tuned.close();
        }
      }
      return points;
    };
    const indexed = backend === 'pgvector' && rows >= HNSW_INDEX_MIN_ROWS;
    const efSearch = indexed ? await sweep(PG_EF_SEARCH) : [];
    const hnsw: HnswPoint[] = [];
    if (indexed) {
      const names = pgTableNames(new URLSearchParams(uri.split('?')[1] ?? '').get('table') ?? 'chunks');
      for (const { m, efConstruction } of PG_HNSW) {
        await withServer(uri, (client) => client.query(`DROP INDEX IF EXISTS ${names.hnsw}`));
        const { store: rebuilt } = openIndexUri(`${uri}&hnsw_m=${m}&hnsw_ef_construction=${efConstruction}`);
        try {
          const started = performance.now();
          await rebuilt.optimize();
          const buildSeconds = round1((performance.now() - started) / 1000);
          console.log(`  HNSW m ${m}, ef_construction ${efConstruction}: built in ${buildSeconds} s`);
          hnsw.push({ m, efConstruction, buildSeconds, efSearch: await sweep(PG_EF_SEARCH.length > 0 ? PG_EF_SEARCH : [DEFAULT_EF_SEARCH]) });
        } finally {
          await rebuilt.close();
        }
      }
    }

    const address = await app.listen({ port: 0, host: '127.0.0.1' });
    const where = `${backend} bench index`;
    const settings: Setting[] = [
      {
        name: 'in process',
        run: async (batch) => {
          const out: number[] = [];
          for (const query of batch) {
            const started = performance.now();
            const hits = await searchIndex(engine, store, { query, k: K, where });
            out.push(performance.now() - started);
            if (hits.length !== K) throw new Error(`searchIndex gave ${hits.length} hits`);
          }
          return { latencies: out, failures: {} };
        },
      },
      {
        // The index alone: the query vectors encoded once beforehand, so growth with rows is the store's, not the encoder's.
        name: 'store.search (vector given)',
        run: async (batch) => {
          const out: number[] = [];
          for (let at = 0; at < batch.length; at++) {
            const vector = Array.from(queryVectors[at % queryVectors.length] ?? []);
            const started = performance.now();
            const hits = await store.search(vector, { k: K });
            out.push(performance.now() - started);
            if (hits.length !== K) throw new Error(`store.search gave ${hits.length} hits`);
          }
          return { latencies: out, failures: {} };
        },
      },
      ...CLIENTS.map((clients) => ({ name: `HTTP ${clients} client${clients === 1 ? '' : 's'}`, run: (batch: readonly string[]) => httpLoad(address, 'bench', clients === 1 ? batch.slice(0, QUERIES) : batch, clients, undefined) })),
      ...(existsSync(RERANKER) ? [{ name: 'HTTP 1 client, rerank', run: (batch: readonly string[]) => httpLoad(address, 'bench', batch.slice(0, QUERIES), 1, RERANKER) }] : []),
    ];
    // Warm: the table opened and its index read on both paths, the models loaded.
    for (const setting of settings) await setting.run(claims.slice(0, 4));
    const perRound: Record<string, { p50: number; p99: number; n: number; failures: Record<string, number> }[]> = {};
    for (let round = 0; round < ROUNDS; round++) {
      for (const [at, setting] of settings.entries()) {
        // Each round and setting its own claims (no repeated query within a round), cycling through SciFact's.
        const offset = ((round * settings.length + at) * REQUESTS) % claims.length;
        const batch = Array.from({ length: setting.name.startsWith('HTTP') ? REQUESTS : QUERIES }, (_, i) => claims[(offset + i) % claims.length] ?? '');
        const { latencies, failures } = await setting.run(batch);
        (perRound[setting.name] ??= []).push({ p50: round1(percentile(latencies, 50)), p99: round1(percentile(latencies, 99)), n: latencies.length, failures });
      }
      console.log(`  round ${round + 1}: ${Object.entries(perRound).map(([name, rounds]) => `${name} p50 ${rounds.at(-1)?.p50} p99 ${rounds.at(-1)?.p99}${failedCount(rounds.at(-1)?.failures) > 0 ? ` (${failedCount(rounds.at(-1)?.failures)} failed)` : ''}`).join('; ')} (load ${load()[0]})`);
    }
    const latency = Object.fromEntries(Object.entries(perRound).map(([name, rounds]) => [name, { p50: round1(median(rounds.map((r) => r.p50))), p99: round1(median(rounds.map((r) => r.p99))), failed: rounds.reduce((sum, r) => sum + failedCount(r.failures), 0), rounds }]));
    return { backend, rows, real: Math.min(rows, real.chunks.length), build: built, recallAt10, ...(efSearch.length === 0 ? {} : { efSearch }), ...(hnsw.length === 0 ? {} : { hnsw }), recallQueries: queryVectors.length, latency, load: load() };
  } finally {
    await app.close();
    await store.close();
  }
}

interface Verdict {
  target: string;
  value: string;
  met: boolean | null;
}

/** The issue's targets at 1M rows (LanceDB, the default store), with the arithmetic. */
const Baseline = z.looseObject({ started: z.string(), results: z.array(z.looseObject({ backend: z.string(), rows: z.number(), latency: z.record(z.string(), z.looseObject({ p50: z.number(), p99: z.number() })) })) });

/** The LanceDB 100k latencies of `--baseline`'s run, for the growth verdict; null without one. */
function baselineAt100k(): { measured: { latency: Record<string, { p50: number; p99: number }> }; from: string } | null {
  if (args.baseline === undefined) return null;
  const earlier = Baseline.parse(JSON.parse(readFileSync(args.baseline, 'utf8')));
  const found = earlier.results.find((r) => r.backend === 'lancedb' && r.rows === 100_000);
  return found === undefined ? null : { measured: { latency: found.latency }, from: `${args.baseline} (run of ${earlier.started})` };
}

function verdicts(results: readonly Measured[]): Verdict[] {
  const lance = (rows: number): Measured | undefined => results.find((r) => r.backend === 'lancedb' && r.rows === rows);
  const at1m = lance(1_000_000);
  const baseline = lance(100_000) === undefined ? baselineAt100k() : null;
  const at100k = lance(100_000) ?? baseline?.measured;
  const against = baseline === null ? '' : ` (100k from ${baseline.from}: another run, another load)`;
  const http8 = (m: { latency: Record<string, { p50: number; p99: number }> } | undefined): { p50: number; p99: number } | undefined => m?.latency['HTTP 8 clients'];
  if (at1m === undefined) {
    return [{ target: 'every 1M target', value: 'not measured: no 1M LanceDB run', met: null }];
  }
  const h1m = http8(at1m);
  const h100k = http8(at100k);
  const out: Verdict[] = [
    { target: 'recall@10 ≥ 0.95 at 1M', value: `${at1m.recallAt10} (${at1m.recallQueries} queries)`, met: at1m.recallAt10 >= 0.95 },
    { target: 'HTTP p50 ≤ 25 ms, 8 clients, no rerank, 1M', value: `${h1m?.p50} ms`, met: h1m === undefined ? null : h1m.p50 <= 25 },
    { target: 'HTTP p99 ≤ 100 ms, 8 clients, no rerank, 1M', value: `${h1m?.p99} ms`, met: h1m === undefined ? null : h1m.p99 <= 100 },
  ];
  if (h1m !== undefined && h100k !== undefined) {
    const growth = h1m.p50 / h100k.p50;
    out.push({ target: 'p50 growth 100k → 1M ≤ 2× (HTTP, 8 clients)', value: `${h1m.p50} / ${h100k.p50} = ${growth.toFixed(2)}×${against}`, met: growth <= 2 });
    const inProcess = (at1m.latency['in process']?.p50 ?? Number.NaN) / (at100k?.latency['in process']?.p50 ?? Number.NaN);
    const storeOnly = (at1m.latency['store.search (vector given)']?.p50 ?? Number.NaN) / (at100k?.latency['store.search (vector given)']?.p50 ?? Number.NaN);
    out.push({ target: 'p50 growth 100k → 1M ≤ 2× (store.search alone, for reference)', value: `${at1m.latency['store.search (vector given)']?.p50} / ${at100k?.latency['store.search (vector given)']?.p50} = ${storeOnly.toFixed(2)}×`, met: storeOnly <= 2 });
    out.push({ target: 'p50 growth 100k → 1M ≤ 2× (in process, for reference)', value: `${at1m.latency['in process']?.p50} / ${at100k?.latency['in process']?.p50} = ${inProcess.toFixed(2)}×`, met: inProcess <= 2 });
  } else {
    out.push({ target: 'p50 growth 100k → 1M ≤ 2×', value: 'not measured: no 100k LanceDB run in this invocation', met: null });
  }
  return out;
}

function markdown(results: readonly Measured[], synthetic: string): string {
  const cell = (m: Measured, name: string): string => {
    const l = m.latency[name];
    if (l === undefined) return '–';
    return `${l.p50} / ${l.p99}${l.failed > 0 ? ` (${l.failed} of ${l.rounds.reduce((sum, r) => sum + r.n + failedCount(r.failures), 0)} failed)` : ''}`;
  };
  const lines = [
    `| store | rows (real) | write s | index build s | index | recall@10 | store.search p50 / p99 ms | in process | HTTP 1 client | HTTP 8 clients | HTTP 32 clients | HTTP 1 client, rerank |`,
    '| --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
    ...results.map((m) => `| ${m.backend === 'pgvector' ? (PG_URL === undefined ? 'pgvector (PGlite)' : 'pgvector (PostgreSQL)') : m.backend} | ${m.rows.toLocaleString('en-US')} (${m.real.toLocaleString('en-US')}) | ${m.build.writeSeconds} | ${m.build.indexSeconds} | ${m.build.index} | ${m.recallAt10} | ${cell(m, 'store.search (vector given)')} | ${cell(m, 'in process')} | ${cell(m, 'HTTP 1 client')} | ${cell(m, 'HTTP 8 clients')} | ${cell(m, 'HTTP 32 clients')} | ${cell(m, 'HTTP 1 client, rerank')} |`),
    '',
    `Synthetic rows: ${synthetic}`,
  ];
  const rebuilt = results.filter((m) => m.hnsw !== undefined);
  if (rebuilt.length > 0) {
    lines.push('', '| store | rows | HNSW m | ef_construction | build s | ef_search | recall@10 | store.search p50 / p99 ms |', '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |');
    for (const m of rebuilt) {
      for (const build of m.hnsw ?? []) {
        for (const point of build.efSearch) lines.push(`| pgvector | ${m.rows.toLocaleString('en-US')} | ${build.m} | ${build.efConstruction} | ${build.buildSeconds} | ${point.efSearch} | ${point.recallAt10} | ${point.p50} / ${point.p99} |`);
      }
    }
  }
  return lines.join('\n');
}

/** `body` with a client of the external server (the URI's query part, Shoal's own parameters, left out). */
async function withServer<T>(url: string, body: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url.split('?')[0] });
  await client.connect();
  try {
    return await body(client);
  } finally {
    await client.end();
  }
}

/** Drops one bench table's relations on the external server (a rerun starts from nothing). */
async function dropBenchTables(url: string, table: string): Promise<void> {
  const names = pgTableNames(table);
  await withServer(url, (client) => client.query(`DROP TABLE IF EXISTS ${names.chunks}, ${names.documents}, ${names.spec}`));
}

/** What the external server builds indexes with (recorded: HNSW build time depends on them). */
async function serverSettings(url: string): Promise<Record<string, string>> {
  return withServer(url, async (client) => {
    const version = await client.query<{ v: string }>('SELECT version() AS v');
    const vector = await client.query<{ v: string }>("SELECT extversion AS v FROM pg_extension WHERE extname = 'vector'");
    const settings = await client.query<{ name: string; setting: string }>(
      "SELECT name, current_setting(name) AS setting FROM pg_settings WHERE name IN ('maintenance_work_mem', 'max_parallel_maintenance_workers', 'shared_buffers', 'work_mem')",
    );
    return {
      server: version.rows[0]?.v ?? 'unknown',
      pgvector: vector.rows[0]?.v ?? 'not installed',
      ...Object.fromEntries(settings.rows.map((r) => [r.name, r.setting])),
    };
  });
}

async function main(): Promise<void> {
  const startedAt = new Date().toISOString();
  const startLoad = load();
  const engine = new InferenceEngine(engineOptionsFromEnv(process.env));
  const dir = mkdtempSync(join(tmpdir(), 'shoal-bench-search-'));
  const postgresServer = PG_URL === undefined ? null : await serverSettings(PG_URL);
  const results: Measured[] = [];
  const skipped: string[] = [];
  try {
    const real = await realSet(engine);
    const maxRows = Math.max(...SIZES);
    const realCount = real.chunks.length;
    // The noise is sized to the real set's own neighbourhoods: a synthetic row sits as close to its centroid as a real chunk to its nearest real chunk.
    const nearest = meanNearestCosine(real.vectors, realCount, real.dim, 200, seededRandom(SEED + 1));
    const { vectors, centroids, description, noiseScale } = syntheticSet(real, maxRows, nearest);
    const norms = inverseNorms(vectors, maxRows, real.dim);
    const synthetic = `past the first ${realCount.toLocaleString('en-US')} real rows (SciFact chunks of ≤ ${CHUNK_TOKENS} tokens, bench-minilm-l6, random weights), ${description} sized so that cos(row, centroid) ≈ ${nearest.toFixed(3)}, the mean cosine of a real chunk to its nearest other chunk; unit-normalized; text copied from the centroid. Not uniform noise, but no real corpus either.`;
    console.log(synthetic);
    const claims = jsonl(join(DATA_DIR, 'scifact', 'queries.jsonl'), Claim).map((claim) => claim.text);
    const queryVectors = await encodeDense(engine, claims.slice(0, RECALL_QUERIES), { model: MODEL, role: 'query' });
    // Written after every index, so a later failure keeps what was measured (`finished: null` until the end).
    const save = (final: boolean): void => {
      const targets = verdicts(results);
      const table = markdown(results, synthetic);
      if (final) {
        const rows: Row[] = results.flatMap((m) => Object.entries(m.latency).map(([setting, l]) => ({ store: m.backend, rows: m.rows, setting, 'p50 ms': l.p50, 'p99 ms': l.p99, failed: l.failed })));
        printTable('search latency (medians over rounds of per-round p50/p99)', rows);
        printTable('build and recall', results.map((m) => ({ store: m.backend, rows: m.rows, real: m.real, 'write s': m.build.writeSeconds, 'index s': m.build.indexSeconds, index: m.build.index, 'recall@10': m.recallAt10 })));
        printTable('issue 41 targets at 1M (LanceDB)', targets.map((t) => ({ target: t.target, value: t.value, met: t.met === null ? 'not measured' : t.met ? 'met' : 'not met' })));
        console.log(`\n${table}\n`);
      }
      const result = {
        machine: machine(),
        load: { start: startLoad, end: load(), note: '2 cores shared with other agents: the bench (client, gateway, engine, PGlite) and whatever else ran shared them' },
        started: startedAt,
        finished: final ? new Date().toISOString() : null,
        command: `npx tsx bench/search.ts ${process.argv.slice(2).join(' ')}`.trim(),
        model: MODEL,
        reranker: existsSync(RERANKER) ? `${RERANKER} (conformance kit, random weights; 50 candidates per query)` : null,
        k: K,
        rounds: ROUNDS,
        queriesPerRound: { storeSearch: QUERIES, inProcess: QUERIES, http1Client: QUERIES, httpConcurrent: REQUESTS, rerank: QUERIES },
        real: { rows: realCount, chunkTokens: CHUNK_TOKENS, tokens: real.tokens, encodeSeconds: round1(real.encodeSeconds), corpus: 'SciFact corpus.jsonl (title + blank line + abstract), chunked by pipelines/documents/chunk.ts' },
        synthetic: { description: synthetic, noise: NOISE, noiseScale, targetCosine: nearest, seed: SEED },
        notes: [
          'Queries are SciFact claims (queries.jsonl), a different claim for every request of a round; in-process latency includes encoding the query with the index model.',
          'The HTTP clients, the gateway and the engine run in one Node process, sharing its event loop and the two cores.',
          'recall@10: store.search(query vector, k 10) against brute-force cosine over the same float32 vectors; below 100,000 rows both stores scan exactly (no ANN index).',
          postgresServer === null
            ? 'pgvector runs on PGlite (PostgreSQL 18 + pgvector in WebAssembly, single-threaded, inside the bench process, served over the wire protocol on a loopback port): not a production PostgreSQL; its figures say nothing about a real server.'
            : `pgvector runs on an external PostgreSQL server on the same machine (${postgresServer.server}; pgvector ${postgresServer.pgvector}), sharing its cores with the bench process.`,
          'Synthetic rows group COMMIT_ROWS (20,000) chunks as one document each, so a commit deletes stale rows of one source, not of 20,000.',
          'bench-minilm-l6 and bert-cross-encoder have random weights: the vectors have the model\'s shape, not its meaning; recall is against exact search on these vectors, not relevance.',
        ],
        postgres: postgresServer,
        skipped,
        results,
        targets,
        markdown: table,
      };
      const out = args.out ?? join(import.meta.dirname, 'results', `search-scale-${startedAt.replace(/[:.]/g, '-')}.json`);
      mkdirSync(join(out, '..'), { recursive: true });
      writeFileSync(out, `${JSON.stringify(result, null, 2)}\n`);
      console.log(`wrote ${out}`);
    };
    for (const rows of SIZES) {
      for (const backend of BACKENDS) {
        if (backend === 'pgvector' && rows > PG_MAX_ROWS) {
          skipped.push(`pgvector at ${rows} rows: over --pg-max-rows ${PG_MAX_ROWS}${PG_URL === undefined ? ' (PGlite is single-threaded WebAssembly in this process)' : ''}`);
          continue;
        }
        let postgres: PgliteServerHandle | null = null;
        try {
          let uri: string;
          if (backend === 'lancedb') uri = join(dir, `lance-${rows}`);
          else if (PG_URL !== undefined) {
            await dropBenchTables(PG_URL, `bench${rows}`);
            uri = `${PG_URL}${PG_URL.includes('?') ? '&' : '?'}table=bench${rows}`;
          } else {
            postgres = await startPgliteServer();
            uri = `postgres://postgres@127.0.0.1:${postgres.port}/postgres?table=bench${rows}`;
          }
          results.push(await measure(engine, backend, uri, rows, real, centroids, vectors, norms, claims, queryVectors));
          save(false);
        } finally {
          await postgres?.stop();
          if (backend === 'pgvector' && PG_URL !== undefined) await dropBenchTables(PG_URL, `bench${rows}`);
          rmSync(join(dir, `lance-${rows}`), { recursive: true, force: true });
        }
      }
    }
    save(true);
  } finally {
    await engine.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
