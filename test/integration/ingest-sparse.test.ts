import { readdir, readFile, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as lancedb from '@lancedb/lancedb';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ShoalMetrics } from '../../adapters/observability/metrics.js';
import { ErrorCode } from '../../adapters/protocol/errors.js';
import { JsonlStore } from '../../adapters/stores/file/store.js';
import { LanceDbStore } from '../../adapters/stores/lancedb/store.js';
import { PgVectorStore } from '../../adapters/stores/pgvector/store.js';
import type { SearchHit, Store } from '../../adapters/stores/store.js';
import { SPARSE_DIMENSION } from '../../adapters/stores/shared/sparse.js';
import { parseDefinition, type PipelineDefinition } from '../../pipelines/documents/definition.js';
import { DocumentParser } from '../../pipelines/documents/parse.js';
import { IngestRunner } from '../../pipelines/documents/runner.js';
import { hitLine, searchIndex } from '../../pipelines/documents/search.js';
import { fileSources } from '../../pipelines/documents/sources.js';
import { InferenceEngine } from '../../pipelines/inference/engine.js';
import { buildGatewayApp } from '../../services/gateway/app.js';
import { TEST_SETTINGS } from '../helpers/gateway.js';
import { startPgliteServer, type PgliteServerHandle } from '../helpers/pglite-server.js';
import { CONFORMANCE_DIR } from '../helpers/shared.js';
import { shoalInProcess } from '../helpers/shoal-in-process.js';

/**
 * A pipeline with a dense encoder and a SPLADE model (the conformance kit's random-weight models,
 * real layouts) ingested into LanceDB, pgvector (PGlite) and JSON Lines: the stored sparse vectors
 * are the engine's own for each chunk text, the sparse search finds the chunk whose exact words
 * are the query, and the default (hybrid) search equals a reciprocal rank fusion (k = 60) of the
 * dense and sparse lists worked out here; `shoal search` and `POST /v1/search` give the same hits.
 */

const DENSE = join(CONFORMANCE_DIR, 'bert-mean-embed');
const SPLADE = join(CONFORMANCE_DIR, 'bert-splade');
const TEXTS: Record<string, string> = {
  'harbour.txt': 'The pilot boat leaves the harbour at dawn and returns before the tide turns.',
  'kitchen.txt': 'Whisk the eggs with sugar, fold in the flour and bake the sponge for forty minutes.',
  'finance.txt': 'Quarterly revenue grew by eleven percent while operating costs stayed flat.',
  'garden.txt': 'Prune the roses in late winter and mulch the beds before the first frost.',
  'orbit.txt': 'The satellite completes one orbit every ninety minutes at an altitude of four hundred kilometres.',
  'music.txt': 'The quartet rehearsed the slow movement until the cello and viola blended perfectly.',
};
const LEXICAL_QUERY = 'Quarterly revenue grew by eleven percent while operating costs stayed flat.';

const engine = new InferenceEngine({ runtime: { intraOpThreads: 1 } });
let dir: string;
let pglite: PgliteServerHandle;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'shoal-ingest-sparse-'));
  await Promise.all(Object.entries(TEXTS).map(([name, text]) => writeFile(join(dir, name), text)));
  pglite = await startPgliteServer();
}, 60_000);
afterAll(async () => {
  await engine.close();
  await pglite?.stop();
  await rm(dir, { recursive: true, force: true });
});

function definition(index: string): PipelineDefinition {
  return parseDefinition({ name: 'hybrid', stages: { parse: { ocr: 'never' }, chunk: { size: 64, overlap: 0 }, encode: { model: DENSE, sparse: { model: SPLADE } }, write: { index } } }, 'test');
}

async function ingest(sink: Store, index: string): Promise<void> {
  const parser = new DocumentParser(engine, { ocr: 'never' });
  try {
    const summary = await new IngestRunner({ definition: definition(index), engine, sink, reader: parser }).run(await fileSources([dir], { include: ['*.txt'] }));
    expect(summary.documents).toEqual({ total: 6, ok: 6, failed: 0, unchanged: 0 });
  } finally {
    await parser.close();
  }
}

interface StoredSparse { text: string; indices: number[]; values: number[] }

/** The engine's sparse vectors for these texts, in one request (as the runner sends them). */
async function engineSparse(texts: readonly string[]): Promise<{ indices: number[]; values: number[] }[]> {
  const result = await engine.encode({ model: SPLADE, items: texts.map((text) => ({ text })), output_types: ['sparse'], role: 'document' });
  return texts.map((_, index) => {
    const sparse = result.items.find((item) => item.index === index)?.sparse;
    if (sparse === undefined) throw new Error(`no sparse vector for item ${index}`);
    return sparse;
  });
}

async function expectEngineSparse(stored: readonly StoredSparse[]): Promise<void> {
  expect(stored).toHaveLength(Object.keys(TEXTS).length);
  const expected = await engineSparse(stored.map((row) => row.text));
  stored.forEach((row, i) => {
    expect(row.indices).toEqual(expected[i]?.indices);
    expect(row.indices.length).toBeGreaterThan(0);
    // Stores keep float32; the engine's numbers are float32 values already.
    row.values.forEach((value, j) => expect(value).toBeCloseTo(expected[i]?.values[j] ?? Number.NaN, 5));
  });
}

/** RRF worked out here from the two lists: Σ 1 / (60 + rank), ties by id. */
function rrf(lists: readonly (readonly SearchHit[])[], k: number): { id: string; score: number }[] {
  const scores = new Map<string, number>();
  for (const list of lists) list.forEach((hit, i) => scores.set(hit.row.id, (scores.get(hit.row.id) ?? 0) + 1 / (60 + i + 1)));
  return [...scores].map(([id, score]) => ({ id, score })).sort((a, b) => b.score - a.score || (a.id < b.id ? -1 : 1)).slice(0, k);
}

async function expectSearches(sink: Store): Promise<SearchHit[]> {
  const spec = await sink.describe();
  expect(spec).toMatchObject({ optionalColumns: ['sparse'], metadata: { model: DENSE, sparse_model: SPLADE } });

  const sparseQuery = (await engine.encode({ model: SPLADE, items: [{ text: LEXICAL_QUERY }], output_types: ['sparse'], role: 'query' })).items[0]?.sparse;
  expect(sparseQuery).toBeDefined();
  const sparseHits = await sink.searchSparse({ indices: sparseQuery?.indices ?? [], values: sparseQuery?.values ?? [], dimension: SPARSE_DIMENSION }, { k: 10 });
  expect(sparseHits[0]?.row.text).toBe(LEXICAL_QUERY);
  expect(sparseHits.length).toBeGreaterThan(1);

  const query = 'when does the pilot boat return to the harbour?';
  const denseVector = (await engine.encode({ model: DENSE, items: [{ text: query }], role: 'query' })).items[0]?.dense ?? [];
  const sparseVector = (await engine.encode({ model: SPLADE, items: [{ text: query }], output_types: ['sparse'], role: 'query' })).items[0]?.sparse;
  const dense = await sink.search(denseVector, { k: 100 });
  const sparse = await sink.searchSparse({ indices: sparseVector?.indices ?? [], values: sparseVector?.values ?? [], dimension: SPARSE_DIMENSION }, { k: 100 });
  expect(dense).toHaveLength(6);
  // Hybrid fuses every ranking the index has: on a store that ranks by text (LanceDB, pgvector)
  // the full-text list too, so the expected fusion includes it there.
  const text = sink.searchText === undefined ? null : await sink.searchText(query, { k: 100 });
  const expected = rrf(text === null ? [dense, sparse] : [dense, sparse, text], 4);
  const hybrid = await searchIndex(engine, sink, { query, k: 4, where: 'test' });
  expect(hybrid.map((hit) => hit.row.id)).toEqual(expected.map((entry) => entry.id));
  hybrid.forEach((hit, i) => expect(hit.score).toBeCloseTo(expected[i]?.score ?? Number.NaN, 12));
  // The modes alone give the two lists.
  expect((await searchIndex(engine, sink, { query, k: 4, mode: 'dense', where: 'test' })).map((hit) => hit.row.id)).toEqual(dense.slice(0, 4).map((hit) => hit.row.id));
  expect((await searchIndex(engine, sink, { query, k: 4, mode: 'sparse', where: 'test' })).map((hit) => hit.row.id)).toEqual(sparse.slice(0, 4).map((hit) => hit.row.id));
  return hybrid;
}

describe('ingest with a sparse encoder, hybrid search', () => {
  it('LanceDB: stores the engine sparse vectors in list columns, fuses dense and sparse; shoal search and POST /v1/search give the same hits', async () => {
    const index = join(dir, 'lance');
    const sink = new LanceDbStore({ dir: index });
    try {
      await ingest(sink, index);
      const db = await lancedb.connect(index);
      const table = await db.openTable('chunks');
      const raw: unknown[] = await table.query().select(['text', 'sparse_indices', 'sparse_values']).toArray();
      table.close();
      db.close();
      const List = z.custom<Iterable<number>>((value) => typeof value === 'object' && value !== null && Symbol.iterator in value).transform((value) => Array.from(value));
      await expectEngineSparse(raw.map((row) => z.object({ text: z.string(), sparse_indices: List, sparse_values: List }).parse(row)).map((row) => ({ text: row.text, indices: row.sparse_indices, values: row.sparse_values })));
      const hybrid = await expectSearches(sink);

      const cli = await shoalInProcess(['search', 'when does the pilot boat return to the harbour?', '--index', index, '--k', '4']);
      expect(cli.code, cli.stderr).toBe(0);
      const lines = cli.stdout.trim().split('\n').map((line) => JSON.parse(line) as unknown);
      expect(lines).toEqual(hybrid.map((hit, i) => hitLine(i + 1, hit)));
      expect(Object.keys(lines[0] as object)).toEqual(['rank', 'score', 'id', 'document_id', 'source', 'page', 'text', 'heading', 'chunk', 'start', 'end', 'metadata']);
      const sparseOnly = await shoalInProcess(['search', LEXICAL_QUERY, '--index', index, '--k', '1', '--mode', 'sparse']);
      expect(sparseOnly.code, sparseOnly.stderr).toBe(0);
      expect(JSON.parse(sparseOnly.stdout)).toMatchObject({ rank: 1, text: LEXICAL_QUERY });

      // POST /v1/search: the same hits, the same mode field.
      const app = buildGatewayApp(
        { engine, jobs: null, models: async () => [], metrics: new ShoalMetrics(), ready: async () => ({ ready: true }) },
        { ...TEST_SETTINGS, indexes: { hybrid: index } },
      );
      try {
        const answer = await app.inject({ method: 'POST', url: '/v1/search', payload: { query: 'when does the pilot boat return to the harbour?', index: 'hybrid', k: 4 } });
        expect(answer.statusCode, answer.body).toBe(200);
        expect(answer.json()).toEqual({ hits: lines });
        const sparseAnswer = await app.inject({ method: 'POST', url: '/v1/search', payload: { query: LEXICAL_QUERY, index: 'hybrid', k: 1, mode: 'sparse' } });
        expect(sparseAnswer.json()).toMatchObject({ hits: [{ rank: 1, text: LEXICAL_QUERY }] });
        const bad = await app.inject({ method: 'POST', url: '/v1/search', payload: { query: 'x', index: 'hybrid', mode: 'colbert' } });
        expect(bad.statusCode).toBe(422);
      } finally {
        await app.close();
      }
    } finally {
      await sink.close();
    }
  });

  it('pgvector: stores them as sparsevec and gives the same hybrid hits', async () => {
    const connection = { host: '127.0.0.1', port: pglite.port, user: 'postgres', database: 'postgres', ssl: false as const };
    const sink = new PgVectorStore({ connection, table: 'hybrid' });
    const client = new pg.Client(connection);
    try {
      await ingest(sink, 'postgres');
      await client.connect();
      const result = await client.query<{ text: string; sparse: string }>('SELECT text, sparse::text AS sparse FROM "hybrid"');
      // pgvector's text form: {i:v,...}/dim with 1-based term ids.
      await expectEngineSparse(result.rows.map((row) => {
        const terms = row.sparse.slice(1, row.sparse.indexOf('}')).split(',').map((term) => term.split(':').map(Number));
        return { text: row.text, indices: terms.map(([index]) => (index ?? 0) - 1), values: terms.map(([, value]) => value ?? Number.NaN) };
      }));
      await expectSearches(sink);
    } finally {
      await client.end();
      await sink.close();
    }
  });

  it('JSON Lines: keeps them in each row and gives the same hybrid hits; an index without sparse vectors refuses hybrid mode', async () => {
    const index = join(dir, 'jsonl');
    const sink = new JsonlStore({ dir: index });
    try {
      await ingest(sink, index);
      const files = (await readdir(join(index, 'chunks'))).filter((name) => name.endsWith('.jsonl'));
      const Line = z.object({ text: z.string(), sparse: z.object({ indices: z.array(z.number()), values: z.array(z.number()) }) });
      const rows = (await Promise.all(files.map(async (name) => (await readFile(join(index, 'chunks', name), 'utf8')).trim().split('\n').slice(1)))).flat();
      await expectEngineSparse(rows.map((line) => Line.parse(JSON.parse(line))).map((row) => ({ text: row.text, ...row.sparse })));
      await expectSearches(sink);
    } finally {
      await sink.close();
    }
    // An index without sparse vectors answers dense only, and says so when asked for more.
    const plain = new JsonlStore({ dir: join(dir, 'plain') });
    try {
      await plain.prepare({ dimension: 32, distance: 'cosine', optionalColumns: [], metadata: { model: DENSE } });
      await expect(searchIndex(engine, plain, { query: 'pilot', k: 3, mode: 'hybrid', where: 'test' })).rejects.toMatchObject({ code: ErrorCode.INVALID_INPUT });
    } finally {
      await plain.close();
    }
  });
});
