import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { openIndexUri } from '../adapters/stores/open.js';
import type { ChunkRow, DocumentState, Store } from '../adapters/stores/store.js';
import { startChromaServer } from '../test/helpers/chroma-server.js';
import { startPgliteServer } from '../test/helpers/pglite-server.js';
import { unitVectors } from '../test/helpers/seeded-vectors.js';
import { startQdrantFake } from '../test/helpers/qdrant-fake.js';
import { startS3Server } from '../test/helpers/s3-server.js';
import { encodeDense } from '../pipelines/documents/stages/encode.js';
import { InferenceEngine } from '../pipelines/inference/engine.js';
import { engineOptionsFromEnv } from '../services/settings/engine-settings.js';
import { DATA_DIR, queries as scifactQueries } from './lib/corpora.js';
import { percentile, printTable, writeResult, type Row } from './lib/report.js';

/**
 * Index write and search speed per backend, through the same `openIndexUri(URI)` that
 * `shoal ingest/search --index URI` use: LanceDB (embedded), pgvector (PGlite served on a
 * loopback port, through the production `pg` driver), Chroma (its own local server), file://
 * (JSON Lines) and s3:// (s3rver). `qdrant` is the REST-contract server of the tests (no Qdrant
 * server runs here): it takes part in the count and ranking checks, and its speed says nothing
 * about Qdrant's.
 *
 * Rows: the SciFact abstracts (../shared/data/scifact/corpus.jsonl, one chunk per abstract, its
 * real text and metadata) with seeded random unit vectors of dimension 384 (the MiniLM size), so
 * the figures measure the stores, not an encoder. Writes: `commit()` calls of `--batches` rows
 * (default: the pipeline's write.batchRows, 2,000, and two others), each into a fresh table;
 * rows/s = rows / wall time. Then a second commit of the same rows (the re-run case) checks that
 * the count does not change, and `second_run_rows` counts the rows a re-run of `shoal ingest`
 * would write: those of documents whose stored state (content hash, settings) differs from
 * theirs. Search: `--queries` seeded random queries, k = 10, one at a time, p50/p99 latency
 * after 5 warm-up queries; the top-10 ids of each backend are compared with LanceDB's, in order
 * and within ties (positions whose scores agree within 1e-6 may swap), and the queries whose
 * top 10 is the same on every backend are counted.
 *
 *   npx tsx bench/sinks.ts [--rows 5183] [--batches 2000,500,5000] [--queries 200] [--backends lancedb,pgvector,chroma,qdrant,file,s3] [--model DIR [--vectors-cache FILE]]
 */

const { values: args } = parseArgs({
  options: {
    rows: { type: 'string', default: '5183' },
    batches: { type: 'string', default: '2000,500,5000' },
    queries: { type: 'string', default: '200' },
    backends: { type: 'string', default: 'lancedb,pgvector,chroma,qdrant,file,s3' },
    model: { type: 'string' },
    'vectors-cache': { type: 'string' },
  },
});

const MODEL = args.model;
const DIM = 384;
const ROWS = Number(args.rows);
const BATCHES = args.batches.split(',').map(Number);
const QUERIES = Number(args.queries);
const BACKENDS = args.backends.split(',');

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
 * query/document geometry. Encoding is done once, before any timing. `--vectors-cache FILE`
 * keeps the vectors (JSON) for later runs of the same rows, queries and model: encoding the
 * 5,183 abstracts takes tens of minutes on a loaded 2-core machine.
 */
async function encoded(): Promise<{ docs: Float32Array[]; queries: number[][] } | null> {
  if (MODEL === undefined) return null;
  const cache = args['vectors-cache'];
  const key = `${MODEL}|${texts.length}|${QUERIES + 5}`;
  if (cache !== undefined && existsSync(cache)) {
    const saved = JSON.parse(readFileSync(cache, 'utf8')) as { key: string; docs: number[][]; queries: number[][] };
    if (saved.key !== key) throw new Error(`${cache} holds vectors of ${saved.key}, not ${key}`);
    return { docs: saved.docs.map((v) => Float32Array.from(v)), queries: saved.queries };
  }
  const engine = new InferenceEngine(engineOptionsFromEnv(process.env));
  try {
    const docs = await encodeDense(engine, texts, { model: MODEL, role: 'document' });
    const asked = await encodeDense(engine, scifactQueries().slice(0, QUERIES + 5), { model: MODEL, role: 'query' });
    const out = { docs, queries: asked.map((v) => Array.from(v)) };
    if (cache !== undefined) writeFileSync(cache, JSON.stringify({ key, docs: docs.map((v) => Array.from(v)), queries: out.queries }));
    return out;
  } finally {
    await engine.close();
  }
}
const real = await encoded();
if (real !== null && real.docs[0]?.length !== DIM) throw new Error(`--model gives ${real.docs[0]?.length} dimensions; this bench writes ${DIM}`);
const vectors = real?.docs ?? unitVectors(abstracts.length, DIM, 7);
const now = new Date().toISOString();
const rows: ChunkRow[] = abstracts.map((doc, i) => {
  const text = texts[i] ?? '';
  return {
    id: `scifact:${doc._id}:0`, document_id: `sha:${doc._id}`, source: `scifact:${doc._id}`, page: 1, chunk: 0, text, start: 0, end: text.length,
    heading: doc.title, settings: 'bench', vector: vectors[i] ?? new Float32Array(DIM), entities: null, labels: null, ingested_at: now,
  };
});
const states: DocumentState[] = rows.map((row) => ({ source: row.source, document_id: row.document_id, settings: 'bench', chunks: 1, pages: 1, ingested_at: now }));
const queries = real?.queries ?? unitVectors(QUERIES + 5, DIM, 11).map((v) => Array.from(v));

const root = mkdtempSync(join(tmpdir(), 'shoal-bench-sinks-'));
const pg = BACKENDS.includes('pgvector') ? await startPgliteServer() : null;
const chroma = BACKENDS.includes('chroma') ? await startChromaServer() : null;
const qdrant = BACKENDS.includes('qdrant') ? await startQdrantFake() : null;
const BUCKET = 'shoal-bench';
const s3 = BACKENDS.includes('s3') ? await startS3Server([BUCKET]) : null;

function uri(backend: string, table: string): string {
  if (backend === 'lancedb') return `lancedb://${join(root, 'lance')}?table=${table}`;
  if (backend === 'pgvector' && pg !== null) return `${pg.url}?table=${table}`;
  if (backend === 'chroma' && chroma !== null) return `chroma://127.0.0.1:${chroma.port}/${table}`;
  if (backend === 'file') return `file://${join(root, 'jsonl')}?table=${table}`;
  if (backend === 'qdrant' && qdrant !== null) return `qdrant://127.0.0.1:${qdrant.port}/${table}`;
  if (backend === 's3' && s3 !== null) return `s3://${BUCKET}/bench?table=${table}`;
  throw new Error(`unknown backend ${backend}`);
}

async function write(sink: Store, batch: number): Promise<number> {
  const started = performance.now();
  for (let at = 0; at < rows.length; at += batch) await sink.commit(rows.slice(at, at + batch), states.slice(at, at + batch));
  return (performance.now() - started) / 1000;
}

/** Rows a re-run of `shoal ingest` would write: documents whose stored state differs. */
async function secondRunRows(sink: Store): Promise<number> {
  const stored = await sink.states(states.map((state) => state.source));
  const changed = new Set(states.filter((state) => {
    const was = stored.get(state.source);
    return was === undefined || was.document_id !== state.document_id || was.settings !== state.settings;
  }).map((state) => state.source));
  return rows.filter((row) => changed.has(row.source)).length;
}

interface Ranked {
  ids: string[];
  scores: number[];
}

/** Same ids in the same order, except that positions whose scores agree within 1e-6 may hold them swapped. */
function sameWithinTies(a: Ranked, b: Ranked): boolean {
  if (a.ids.length !== b.ids.length) return false;
  for (let i = 0; i < a.ids.length; i++) {
    if (a.ids[i] === b.ids[i]) continue;
    const tied = (list: Ranked, id: string | undefined): boolean => {
      const at = id === undefined ? -1 : list.ids.indexOf(id);
      return at !== -1 && Math.abs((list.scores[at] ?? Number.NaN) - (a.scores[i] ?? Number.NaN)) <= 1e-6;
    };
    if (!tied(b, a.ids[i]) || !tied(a, b.ids[i])) return false;
  }
  return true;
}

const writeRows: Row[] = [];
const searchRows: Row[] = [];
const topIds = new Map<string, Ranked[]>();
try {
  for (const backend of BACKENDS) {
    for (const batch of BATCHES) {
      const table = `w${batch}`;
      const { store: sink } = openIndexUri(uri(backend, table), { batchRows: Math.min(batch, 1_000), ...(s3 === null ? {} : { s3: s3.settings() }) });
      await sink.prepare({ dimension: DIM, distance: 'cosine', optionalColumns: [], metadata: { model: 'random-384' } });
      const seconds = await write(sink, batch);
      const secondRun = await secondRunRows(sink);
      const rewrite = await write(sink, batch);
      const count = await sink.count();
      if (count !== rows.length) throw new Error(`${backend}: ${count} rows after two writes of ${rows.length}`);
      writeRows.push({ backend, batch, rows: rows.length, seconds, rows_per_s: Math.round(rows.length / seconds), second_run_rows: secondRun, rewrite_s: rewrite, count_after_rewrite: count });
      console.error(`${backend} batch ${batch}: ${Math.round(rows.length / seconds)} rows/s`);
      if (batch === BATCHES[0]) {
        for (const query of queries.slice(0, 5)) await sink.search(query, { k: 10 });
        const latencies: number[] = [];
        const ranked: Ranked[] = [];
        for (const query of queries.slice(5)) {
          const started = performance.now();
          const hits = await sink.search(query, { k: 10 });
          latencies.push(performance.now() - started);
          ranked.push({ ids: hits.map((hit) => hit.row.id), scores: hits.map((hit) => hit.score) });
        }
        topIds.set(backend, ranked);
        const reference = topIds.get('lancedb');
        const same = reference === undefined ? Number.NaN : ranked.filter((list, q) => list.ids.join() === reference[q]?.ids.join()).length / ranked.length;
        const withinTies = reference === undefined ? Number.NaN : ranked.filter((list, q) => reference[q] !== undefined && sameWithinTies(list, reference[q])).length / ranked.length;
        // Share of LanceDB's top-10 ids found in this backend's top 10 (order aside), averaged.
        const overlap = reference === undefined ? Number.NaN : ranked.reduce((sum, list, q) => sum + list.ids.filter((id) => reference[q]?.ids.includes(id)).length / 10, 0) / ranked.length;
        searchRows.push({
          backend, rows: rows.length, queries: latencies.length, p50_ms: percentile(latencies, 50), p99_ms: percentile(latencies, 99),
          same_top10_as_lancedb: same, same_within_ties: withinTies, top10_overlap: overlap,
        });
      }
      await sink.close();
    }
  }
} finally {
  await pg?.stop();
  await chroma?.stop();
  await qdrant?.stop();
  await s3?.stop();
  rmSync(root, { recursive: true, force: true });
}

printTable(`Index writes: ${rows.length} SciFact abstracts, ${MODEL === undefined ? 'random unit vectors' : 'vectors of the model'} (dimension ${DIM}), commit() of <batch> rows`, writeRows);
printTable(`Search: k = 10, ${QUERIES} ${MODEL === undefined ? 'random' : 'SciFact'} queries, one at a time`, searchRows);
// Queries whose top 10 (ids in order) is the same on every backend measured, exactly and within ties.
const lists = [...topIds.values()];
const everywhere = (same: (a: Ranked, b: Ranked) => boolean): number =>
  (lists[0] ?? []).filter((first, q) => lists.every((list) => { const other = list[q]; return other !== undefined && same(first, other); })).length;
const agreement = {
  backends: [...topIds.keys()].join(','),
  queries: lists[0]?.length ?? 0,
  identical_everywhere: everywhere((a, b) => a.ids.join() === b.ids.join()),
  identical_within_ties: everywhere(sameWithinTies),
};
printTable('Top-10 agreement across backends', [agreement]);
const vectorsUsed = MODEL === undefined ? 'seeded random unit vectors' : `${MODEL} (abstracts as documents, SciFact queries as queries)`;
console.log(`\n${writeResult('sinks', { dimension: DIM, rows: rows.length, vectors: vectorsUsed, writes: writeRows, search: searchRows, agreement })}`);
