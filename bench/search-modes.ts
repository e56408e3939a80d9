import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { z } from 'zod';
import { openIndexUri } from '../adapters/stores/open.js';
import { searchDocuments } from '../pipelines/documents/search-groups.js';
import type { SearchMode } from '../pipelines/documents/search.js';
import { InferenceEngine } from '../pipelines/inference/engine.js';
import { ingest } from '../services/library/documents.js';
import { engineOptionsFromEnv } from '../services/settings/engine-settings.js';
import { DATA_DIR, SHARED_DIR } from './lib/corpora.js';
import { machine, percentile, printTable, type Row } from './lib/report.js';
import { startPgliteServer } from '../test/helpers/pglite-server.js';

/**
 * Retrieval quality of `shoal search`'s modes on SciFact (BEIR's test split: 300 claims, 339
 * judged abstracts): nDCG@10 and recall@10 of dense, text (full-text, BM25 in LanceDB) and hybrid
 * (dense + text fused by reciprocal rank fusion, k = 60), per document (`--group-by document`,
 * so an abstract split into several chunks counts once, as BEIR scores documents).
 *
 * The abstracts (`title` + blank line + `text`, id = the corpus id) go through the library's
 * `ingest` (the same runner as `shoal ingest -`) into a fresh LanceDB folder with `--model`; each
 * query then runs through `searchDocuments`, the code behind `shoal search --group-by document`.
 * The conformance kit's encoders have random weights (their READMEs): the dense ranking is then
 * near chance and the text one is the real signal; hybrid shows what fusing a poor leg costs.
 * `--docs N` takes a subset: every abstract judged for a test query, then the others in file
 * order up to N (distractors). `--stores lancedb,pgvector` measures each store (pgvector: PGlite,
 * PostgreSQL 18 in WebAssembly, served on a loopback port as the tests do; its text ranking is
 * ts_rank, not BM25). Latencies are per query through searchDocuments, one at a time; the first
 * text search of each store (which builds its full-text index) is timed apart.
 *
 *   npx tsx bench/search-modes.ts [--model DIR] [--docs 5183] [--modes dense,text,hybrid] [--stores lancedb,pgvector] [--out bench/measured/search-modes.json]
 */

const { values: args } = parseArgs({
  options: {
    model: { type: 'string', default: join(SHARED_DIR, 'conformance', 'bert-mean-embed') },
    docs: { type: 'string', default: '5183' },
    modes: { type: 'string', default: 'dense,text,hybrid' },
    stores: { type: 'string', default: 'lancedb' },
    out: { type: 'string' },
  },
});

const SCIFACT = join(DATA_DIR, 'scifact');
const K = 10;
const Doc = z.looseObject({ _id: z.string(), title: z.string(), text: z.string() });
const Query = z.looseObject({ _id: z.string(), text: z.string() });

function jsonl<T>(path: string, schema: z.ZodType<T>): T[] {
  return readFileSync(path, 'utf8').split('\n').filter((line) => line.trim() !== '').map((line) => schema.parse(JSON.parse(line)));
}

/** qrels/test.tsv: query id → (document id → relevance). */
function qrels(): Map<string, Map<string, number>> {
  const out = new Map<string, Map<string, number>>();
  for (const line of readFileSync(join(SCIFACT, 'qrels', 'test.tsv'), 'utf8').split('\n').slice(1)) {
    const [query, doc, score] = line.trim().split('\t');
    if (query === undefined || doc === undefined || score === undefined) continue;
    const judged = out.get(query) ?? new Map<string, number>();
    judged.set(doc, Number(score));
    out.set(query, judged);
  }
  return out;
}

/** nDCG@k with graded gains (BEIR's: rel / log2(rank + 1)), ideal from the judged documents. */
function ndcg(ranked: readonly string[], judged: ReadonlyMap<string, number>, k: number): number {
  const dcg = ranked.slice(0, k).reduce((sum, id, i) => sum + (judged.get(id) ?? 0) / Math.log2(i + 2), 0);
  const ideal = [...judged.values()].sort((a, b) => b - a).slice(0, k).reduce((sum, rel, i) => sum + rel / Math.log2(i + 2), 0);
  return ideal === 0 ? 0 : dcg / ideal;
}

function recall(ranked: readonly string[], judged: ReadonlyMap<string, number>, k: number): number {
  const relevant = [...judged].filter(([, rel]) => rel > 0).map(([id]) => id);
  return relevant.length === 0 ? 0 : relevant.filter((id) => ranked.slice(0, k).includes(id)).length / relevant.length;
}

const judgments = qrels();
const queries = jsonl(join(SCIFACT, 'queries.test.jsonl'), Query).filter((query) => judgments.has(query._id));
const corpus = jsonl(join(SCIFACT, 'corpus.jsonl'), Doc);
const wanted = Math.min(Number(args.docs), corpus.length);
const judgedIds = new Set([...judgments.values()].flatMap((judged) => [...judged.keys()]));
const subset = wanted >= corpus.length ? corpus : [...corpus.filter((doc) => judgedIds.has(doc._id)), ...corpus.filter((doc) => !judgedIds.has(doc._id))].slice(0, Math.max(wanted, judgedIds.size));
const modes = args.modes.split(',').map((mode) => z.enum(['dense', 'sparse', 'text', 'hybrid']).parse(mode) as SearchMode);

const stores = args.stores.split(',').map((store) => z.enum(['lancedb', 'pgvector']).parse(store));
const mean = (values: readonly number[]): number => values.reduce((a, b) => a + b, 0) / values.length;

interface StoreRun {
  rows: Row[];
  chunks: number;
  ingestSeconds: number;
  firstTextSearchSeconds: number;
}

/** Ingests the subset into `index` and runs every test query in every mode. */
async function measure(engine: InferenceEngine, store: string, index: string): Promise<StoreRun> {
  const ingestStarted = performance.now();
  const summary = await ingest(engine, { records: subset.map((doc) => ({ id: doc._id, text: `${doc.title}\n\n${doc.text}` })), index, model: args.model });
  const ingestSeconds = (performance.now() - ingestStarted) / 1000;
  console.log(`${store}: ingested ${subset.length} abstracts (${summary.chunks} chunks) with ${args.model} in ${ingestSeconds.toFixed(1)} s`);
  const { store: sink } = openIndexUri(index);
  const rows: Row[] = [];
  let firstTextSearchSeconds = Number.NaN;
  try {
    for (const mode of modes) {
      const scores: number[] = [];
      const recalls: number[] = [];
      const latencies: number[] = [];
      for (const [at, query] of queries.entries()) {
        const started = performance.now();
        const documents = await searchDocuments(engine, sink, { query: query.text, k: K, mode, where: store });
        const ms = performance.now() - started;
        // The first text search of the index builds its full-text index: timed apart, out of the latencies.
        if (at === 0 && mode !== 'dense' && Number.isNaN(firstTextSearchSeconds)) firstTextSearchSeconds = ms / 1000;
        else latencies.push(ms);
        // A record's id is its source: the corpus id.
        const ranked = documents.map((document) => document.source);
        const judged = judgments.get(query._id) ?? new Map<string, number>();
        scores.push(ndcg(ranked, judged, K));
        recalls.push(recall(ranked, judged, K));
      }
      rows.push({ store, mode, queries: queries.length, 'nDCG@10': Number(mean(scores).toFixed(4)), 'recall@10': Number(mean(recalls).toFixed(4)), 'p50 ms': Number(percentile(latencies, 50).toFixed(1)), 'p99 ms': Number(percentile(latencies, 99).toFixed(1)) });
    }
  } finally {
    await sink.close();
  }
  return { rows, chunks: summary.chunks, ingestSeconds: Number(ingestSeconds.toFixed(1)), firstTextSearchSeconds: Number(firstTextSearchSeconds.toFixed(2)) };
}

const dir = mkdtempSync(join(tmpdir(), 'shoal-bench-search-modes-'));
const engine = new InferenceEngine(engineOptionsFromEnv(process.env));
const runs: Record<string, StoreRun> = {};
try {
  for (const store of stores) {
    if (store === 'lancedb') {
      runs[store] = await measure(engine, store, join(dir, 'lance'));
      continue;
    }
    const postgres = await startPgliteServer();
    try {
      runs[store] = await measure(engine, store, `postgres://postgres@127.0.0.1:${postgres.port}/postgres?table=scifact`);
    } finally {
      await postgres.stop();
    }
  }
  const rows = Object.values(runs).flatMap((run) => run.rows);
  printTable(`SciFact test, ${subset.length} abstracts, ${args.model}`, rows);
  for (const [store, run] of Object.entries(runs)) console.log(`${store}: first text search (builds the full-text index): ${run.firstTextSearchSeconds} s`);
  const result = {
    machine: machine(),
    date: new Date().toISOString(),
    command: `npx tsx bench/search-modes.ts ${process.argv.slice(2).join(' ')}`.trim(),
    model: args.model,
    docs: subset.length,
    rrfK: 60,
    stores: Object.fromEntries(Object.entries(runs).map(([store, run]) => [store, { chunks: run.chunks, ingestSeconds: run.ingestSeconds, firstTextSearchSeconds: run.firstTextSearchSeconds }])),
    rows,
  };
  const out = args.out ?? join(import.meta.dirname, 'results', `search-modes-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
  mkdirSync(join(out, '..'), { recursive: true });
  writeFileSync(out, `${JSON.stringify(result, null, 2)}\n`);
  console.log(`wrote ${out}`);
} finally {
  await engine.close();
  rmSync(dir, { recursive: true, force: true });
}
