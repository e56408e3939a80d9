import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { parseIndexRef } from '../adapters/stores/open.js';
import type { ChunkRow, DocumentState } from '../adapters/stores/store.js';
import { startChromaServer } from '../test/helpers/chroma-server.js';
import { startPgliteServer } from '../test/helpers/pglite-server.js';
import { percentile, printTable, writeResult, type Row } from './lib/report.js';

/**
 * What keeping an index open is worth to a search (issue 41: "the gateway keeps each named index
 * open, never per request"): the same vector searches on one LanceDB table, each through a store
 * opened, searched and closed (the gateway's path before services/gateway/index-pool.ts), and
 * through one store kept open (its path now). Store calls only: no encoder, no HTTP, so the
 * difference is the open itself. Rounds interleave the two ways; medians of the per-round p50s.
 *
 * LanceDB is a local folder; pgvector runs on PGlite (PostgreSQL + pgvector in WASM, over a
 * loopback socket: a connection costs what a local server's does, not a remote one's TLS
 * handshake); Chroma is its own local server.
 *
 *   npx tsx bench/index-open.ts [--rows 5000] [--dimension 384] [--queries 100] [--rounds 5] [--backends lancedb,pgvector,chroma]
 */

const { values: args } = parseArgs({
  options: {
    rows: { type: 'string', default: '5000' },
    dimension: { type: 'string', default: '384' },
    queries: { type: 'string', default: '100' },
    rounds: { type: 'string', default: '5' },
    backends: { type: 'string', default: 'lancedb,pgvector,chroma' },
  },
});
const BACKENDS = (args.backends ?? '').split(',').filter((name) => name !== '');
const rows = Number(args.rows);
const dimension = Number(args.dimension);
const queries = Number(args.queries);
const rounds = Number(args.rounds);

/** A deterministic pseudo-random unit vector (xorshift), so runs search the same table. */
function vector(seed: number): number[] {
  let state = (seed * 2654435761) >>> 0 || 1;
  const values = Array.from({ length: dimension }, () => {
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    return ((state >>> 0) / 4294967296) * 2 - 1;
  });
  const norm = Math.hypot(...values);
  return values.map((value) => value / norm);
}

const dir = mkdtempSync(join(tmpdir(), 'shoal-index-open-'));
const pg = BACKENDS.includes('pgvector') ? await startPgliteServer() : null;
const chroma = BACKENDS.includes('chroma') ? await startChromaServer() : null;
const uris: Record<string, string> = {
  lancedb: join(dir, 'lance'),
  ...(pg === null ? {} : { pgvector: `${pg.url}?table=open_bench` }),
  ...(chroma === null ? {} : { chroma: `chroma://127.0.0.1:${chroma.port}/open_bench` }),
};
const median = (values: number[]): number => percentile(values, 50);
const summary = (backend: string, name: string, runs: number[][]): Row => ({
  backend,
  store: name,
  'p50 ms': median(runs.map((run) => percentile(run, 50))),
  'p99 ms': median(runs.map((run) => percentile(run, 99))),
  'round p50s': runs.map((run) => percentile(run, 50).toFixed(1)).join(' '),
});
const table: Row[] = [];
const ratios: Record<string, number> = {};
try {
  for (const backend of BACKENDS) {
    const uri = uris[backend];
    if (uri === undefined) throw new Error(`unknown backend ${backend}`);
    const ref = parseIndexRef(uri, { table: 'chunks', batchRows: 1_000 });
    const writer = ref.open();
    await writer.prepare({ dimension, distance: 'cosine', optionalColumns: [], metadata: { model: 'synthetic' } });
    for (let from = 0; from < rows; from += 1_000) {
      const batch: ChunkRow[] = [];
      const states: DocumentState[] = [];
      for (let i = from; i < Math.min(rows, from + 1_000); i++) {
        batch.push({ id: `doc${i}:0`, document_id: `d${i}`, source: `doc${i}`, page: 1, chunk: 0, text: `row ${i}`, start: 0, end: 5, heading: null, settings: 's', vector: vector(i), entities: null, labels: null, ingested_at: '2026-11-29T00:00:00Z' });
        states.push({ source: `doc${i}`, document_id: `d${i}`, settings: 's', chunks: 1, pages: 1, ingested_at: '2026-11-29T00:00:00Z' });
      }
      await writer.commit(batch, states);
    }
    await writer.optimize();
    await writer.close();

    const perRequest: number[][] = [];
    const kept: number[][] = [];
    const keptStore = ref.open();
    await keptStore.search(vector(-1), { k: 10 });
    for (let round = 0; round < rounds; round++) {
      const opened: number[] = [];
      for (let q = 0; q < queries; q++) {
        const started = performance.now();
        const store = ref.open();
        await store.search(vector(rows + q), { k: 10 });
        await store.close();
        opened.push(performance.now() - started);
      }
      const held: number[] = [];
      for (let q = 0; q < queries; q++) {
        const started = performance.now();
        await keptStore.search(vector(rows + q), { k: 10 });
        held.push(performance.now() - started);
      }
      perRequest.push(opened);
      kept.push(held);
    }
    await keptStore.close();
    const each = [summary(backend, 'opened and closed per search', perRequest), summary(backend, 'kept open', kept)];
    table.push(...each);
    ratios[backend] = Number(each[0]?.['p50 ms']) / Number(each[1]?.['p50 ms']);
  }
  printTable(`${rows} rows of ${dimension}-d per backend, ${queries} searches a round, ${rounds} interleaved rounds (medians)`, table);
  for (const [backend, ratio] of Object.entries(ratios)) console.log(`${backend}: kept open ${ratio.toFixed(2)}x faster by the median p50`);
  console.log(`results: ${writeResult('index-open', { rows, dimension, queries, rounds, table, ratios })}`);
} finally {
  await pg?.stop();
  await chroma?.stop();
  rmSync(dir, { recursive: true, force: true });
}
