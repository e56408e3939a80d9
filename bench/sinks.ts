import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { openSink } from '../adapters/sinks/open.js';
import type { ChunkRow, DocumentState, Sink } from '../adapters/sinks/sink.js';
import { startChromaServer } from '../test/helpers/chroma-server.js';
import { startPgliteServer } from '../test/helpers/pglite-server.js';
import { encodeDense } from '../pipelines/documents/stages/encode.js';
import { InferenceEngine } from '../pipelines/inference/engine.js';
import { engineOptionsFromEnv } from '../services/settings/engine-settings.js';
import { DATA_DIR, queries as scifactQueries } from './lib/corpora.js';
import { percentile, printTable, writeResult, type Row } from './lib/report.js';

/**
 * Index write and search speed per backend, through the same `openSink(URI)` that
 * `shoal ingest/search --index URI` use: LanceDB (embedded), pgvector (PGlite served on a
 * loopback port, through the production `pg` driver), Chroma (its own local server) and
 * file:// (JSON Lines). Qdrant is left out: no Qdrant server runs here (its tests use a
 * REST-contract server, whose speed says nothing about Qdrant's).
 *
 * Rows: the SciFact abstracts (../shared/data/scifact/corpus.jsonl, one chunk per abstract, its
 * real text and metadata) with seeded random unit vectors of dimension 384 (the MiniLM size), so
 * the figures measure the stores, not an encoder. Writes: `commit()` calls of `--batches` rows
 * (default: the pipeline's write.batchRows, 2,000, and two others), each into a fresh table;
 * rows/s = rows / wall time. Then a second commit of the same rows (the re-run case) checks that
 * the count does not change. Search: `--queries` seeded random queries, k = 10, one at a time,
 * p50/p99 latency after 5 warm-up queries; the top-10 ids of each backend are compared with
 * LanceDB's (same rows, exact search everywhere below 100k rows; Chroma's HNSW may differ).
 *
 *   npx tsx bench/sinks.ts [--rows 5183] [--batches 2000,500,5000] [--queries 200] [--backends lancedb,pgvector,chroma,file] [--model DIR]
 */

const { values: args } = parseArgs({
  options: {
    rows: { type: 'string', default: '5183' },
    batches: { type: 'string', default: '2000,500,5000' },
    queries: { type: 'string', default: '200' },
    backends: { type: 'string', default: 'lancedb,pgvector,chroma,file' },
    model: { type: 'string' },
  },
});

const MODEL = args.model;
const DIM = 384;
const ROWS = Number(args.rows);
const BATCHES = args.batches.split(',').map(Number);
const QUERIES = Number(args.queries);
const BACKENDS = args.backends.split(',');

function random(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function unitVectors(count: number, seed: number): Float32Array[] {
  const next = random(seed);
  return Array.from({ length: count }, () => {
    const v = Float32Array.from({ length: DIM }, () => next() * 2 - 1);
    const norm = Math.hypot(...v);
    return v.map((x) => x / norm);
  });
}

interface Abstract {
  _id: string;
  title: string;
  text: string;
}

const abstracts = readFileSync(join(DATA_DIR, 'scifact', 'corpus.jsonl'), 'utf8').split('\n').filter((line) => line.trim() !== '').slice(0, ROWS).map((line) => JSON.parse(line) as Abstract);
const texts = abstracts.map((doc) => `${doc.title}\n\n${doc.text}`);
/**
 * `--model DIR`: real vectors instead (e.g. ../shared/conformance/bench-minilm-l6) for the
 * abstracts and the first `--queries` SciFact queries, so the top-10 comparison is on real
 * query/document geometry. Encoding is done once, before any timing.
 */
async function encoded(): Promise<{ docs: Float32Array[]; queries: number[][] } | null> {
  if (MODEL === undefined) return null;
  const engine = new InferenceEngine(engineOptionsFromEnv(process.env));
  try {
    const docs = await encodeDense(engine, texts, { model: MODEL, role: 'document' });
    const asked = await encodeDense(engine, scifactQueries().slice(0, QUERIES + 5), { model: MODEL, role: 'query' });
    return { docs, queries: asked.map((v) => Array.from(v)) };
  } finally {
    await engine.close();
  }
}
const real = await encoded();
if (real !== null && real.docs[0]?.length !== DIM) throw new Error(`--model gives ${real.docs[0]?.length} dimensions; this bench writes ${DIM}`);
const vectors = real?.docs ?? unitVectors(abstracts.length, 7);
const now = new Date().toISOString();
const rows: ChunkRow[] = abstracts.map((doc, i) => {
  const text = texts[i] ?? '';
  return {
    id: `scifact:${doc._id}:0`, document_id: `sha:${doc._id}`, source: `scifact:${doc._id}`, page: 1, chunk: 0, text, start: 0, end: text.length,
    heading: doc.title, settings: 'bench', vector: vectors[i] ?? new Float32Array(DIM), entities: null, labels: null, ingested_at: now,
  };
});
const states: DocumentState[] = rows.map((row) => ({ source: row.source, document_id: row.document_id, settings: 'bench', chunks: 1, pages: 1, ingested_at: now }));
const queries = real?.queries ?? unitVectors(QUERIES + 5, 11).map((v) => Array.from(v));

const root = mkdtempSync(join(tmpdir(), 'shoal-bench-sinks-'));
const pg = BACKENDS.includes('pgvector') ? await startPgliteServer() : null;
const chroma = BACKENDS.includes('chroma') ? await startChromaServer() : null;

function uri(backend: string, table: string): string {
  if (backend === 'lancedb') return `lancedb://${join(root, 'lance')}?table=${table}`;
  if (backend === 'pgvector' && pg !== null) return `${pg.url}?table=${table}`;
  if (backend === 'chroma' && chroma !== null) return `chroma://127.0.0.1:${chroma.port}/${table}`;
  if (backend === 'file') return `file://${join(root, 'jsonl')}?table=${table}`;
  throw new Error(`unknown backend ${backend}`);
}

async function write(sink: Sink, batch: number): Promise<number> {
  const started = performance.now();
  for (let at = 0; at < rows.length; at += batch) await sink.commit(rows.slice(at, at + batch), states.slice(at, at + batch));
  return (performance.now() - started) / 1000;
}

const writeRows: Row[] = [];
const searchRows: Row[] = [];
const topIds = new Map<string, string[][]>();
try {
  for (const backend of BACKENDS) {
    for (const batch of BATCHES) {
      const table = `w${batch}`;
      const { sink } = openSink(uri(backend, table), { batchRows: Math.min(batch, 1_000) });
      await sink.prepare({ dimension: DIM, distance: 'cosine', optionalColumns: [], metadata: { model: 'random-384' } });
      const seconds = await write(sink, batch);
      const rewrite = await write(sink, batch);
      const count = await sink.count();
      if (count !== rows.length) throw new Error(`${backend}: ${count} rows after two writes of ${rows.length}`);
      writeRows.push({ backend, batch, rows: rows.length, seconds, rows_per_s: Math.round(rows.length / seconds), rewrite_s: rewrite, count_after_rewrite: count });
      console.error(`${backend} batch ${batch}: ${Math.round(rows.length / seconds)} rows/s`);
      if (batch === BATCHES[0]) {
        for (const query of queries.slice(0, 5)) await sink.search(query, { k: 10 });
        const latencies: number[] = [];
        const ids: string[][] = [];
        for (const query of queries.slice(5)) {
          const started = performance.now();
          const hits = await sink.search(query, { k: 10 });
          latencies.push(performance.now() - started);
          ids.push(hits.map((hit) => hit.row.id));
        }
        topIds.set(backend, ids);
        const reference = topIds.get('lancedb');
        const same = reference === undefined ? Number.NaN : ids.filter((list, q) => list.join() === reference[q]?.join()).length / ids.length;
        // Share of LanceDB's top-10 ids found in this backend's top 10 (order aside), averaged.
        const overlap = reference === undefined ? Number.NaN : ids.reduce((sum, list, q) => sum + list.filter((id) => reference[q]?.includes(id)).length / 10, 0) / ids.length;
        searchRows.push({ backend, rows: rows.length, queries: latencies.length, p50_ms: percentile(latencies, 50), p99_ms: percentile(latencies, 99), same_top10_as_lancedb: same, top10_overlap: overlap });
      }
      await sink.close();
    }
  }
} finally {
  await pg?.stop();
  await chroma?.stop();
  rmSync(root, { recursive: true, force: true });
}

printTable(`Index writes: ${rows.length} SciFact abstracts, ${MODEL === undefined ? 'random unit vectors' : 'vectors of the model'} (dimension ${DIM}), commit() of <batch> rows`, writeRows);
printTable(`Search: k = 10, ${QUERIES} ${MODEL === undefined ? 'random' : 'SciFact'} queries, one at a time`, searchRows);
const vectorsUsed = MODEL === undefined ? 'seeded random unit vectors' : `${MODEL} (abstracts as documents, SciFact queries as queries)`;
console.log(`\n${writeResult('sinks', { dimension: DIM, rows: rows.length, vectors: vectorsUsed, writes: writeRows, search: searchRows })}`);
