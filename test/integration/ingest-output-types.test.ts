import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { z } from 'zod';
import { InferenceEngine } from '../../pipelines/inference/engine.js';
import { startPgliteServer, type PgliteServerHandle } from '../helpers/pglite-server.js';
import { referenceHalf } from '../helpers/reference-quantize.js';
import { FIXTURES_DIR } from '../helpers/shared.js';
import { parseJsonl, runShoal } from '../helpers/shoal-cli.js';

/**
 * A pipeline file whose encode stage asks for `dtype: float16`, run by `shoal ingest` into a
 * pgvector index (PGlite on a loopback port), then `shoal search` over it: the table stores
 * `halfvec`, each stored vector is the half-precision rounding (independent reference) of the
 * chunk's float32 vector computed in process, and the search (its query converted to float16 too)
 * ranks the chunks as float32 cosine similarity does. Two CLI runs: each loads the model.
 */

const MODEL = join(FIXTURES_DIR, 'models', 'tiny-bert-mean');
const root = await mkdtemp(join(tmpdir(), 'shoal-ingest-dtype-'));
const docs = join(root, 'docs');
let postgres: PgliteServerHandle;
let engine: InferenceEngine;

function cosine(a: readonly number[], b: readonly number[]): number {
  let dot = 0;
  let aa = 0;
  let bb = 0;
  a.forEach((x, i) => {
    dot += x * (b[i] ?? 0);
    aa += x * x;
    bb += (b[i] ?? 0) ** 2;
  });
  return dot / Math.sqrt(aa * bb);
}

const NOTES = [
  'The harbor master counts forty fishing boats every morning before sunrise.',
  'Apple trees in the northern orchard bloom two weeks later than the southern ones.',
  'A faint comet crossed the constellation of Orion during the second week of March.',
  'The bakery on Elm Street sells rye bread, croissants and a famous cardamom bun.',
  'Measurements show the glacier retreated eleven meters over the last summer season.',
];

const Summary = z.object({ documents: z.object({ ok: z.number(), failed: z.number() }), chunks: z.number() });
const Hit = z.object({ rank: z.number(), score: z.number(), id: z.string(), source: z.string() });

beforeAll(async () => {
  await mkdir(docs);
  await Promise.all(NOTES.map((text, i) => writeFile(join(docs, `note-${i}.txt`), text)));
  await writeFile(join(root, 'float16.yaml'), ['name: notes-half', 'stages:', '  encode:', `    model: ${MODEL}`, '    dtype: float16', ''].join('\n'));
  postgres = await startPgliteServer();
  engine = new InferenceEngine({ sources: { allowDownload: false }, runtime: { intraOpThreads: 1 }, memoryBudget: '1GiB' });
}, 120_000);
afterAll(async () => {
  await engine?.close();
  await postgres?.stop();
  await rm(root, { recursive: true, force: true });
});

async function query<R extends pg.QueryResultRow>(text: string, params: unknown[] = []): Promise<R[]> {
  const client = new pg.Client({ connectionString: postgres.url });
  await client.connect();
  try {
    return (await client.query<R>(text, params)).rows;
  } finally {
    await client.end();
  }
}

it('ingests with a float16 pipeline into halfvec columns and searches them like float32 vectors', async () => {
  const index = `${postgres.url}?table=notes_half`;
  const run = await runShoal(['ingest', '--no-progress', '--json', '--pipeline', join(root, 'float16.yaml'), '--index', index, docs]);
  expect(run.code, run.stderr).toBe(0);
  expect(Summary.parse(JSON.parse(run.stdout))).toMatchObject({ documents: { ok: NOTES.length, failed: 0 }, chunks: NOTES.length });
  const types = await query<{ t: string }>(`SELECT format_type(atttypid, atttypmod) AS t FROM pg_attribute WHERE attrelid = '"notes_half"'::regclass AND attname = 'vector'`);
  expect(types.map((row) => row.t)).toEqual(['halfvec(8)']);
  const spec = await query<{ spec: { vectorType: string } }>(`SELECT spec FROM "notes_half__spec"`);
  expect(spec[0]?.spec.vectorType).toBe('float16');

  // The float32 vectors of the same chunks, in process: each stored vector is their half rounding.
  const rows = await query<{ source: string; text: string; v: string }>(`SELECT source, text, vector::text AS v FROM "notes_half"`);
  const encoded = await engine.encode({ model: MODEL, items: rows.map((row) => row.text), role: 'document' });
  const full = encoded.items.map((item) => item.dense ?? []);
  rows.forEach((row, i) => expect(row.v.slice(1, -1).split(',').map((x) => Math.fround(Number(x))), row.source).toEqual((full[i] ?? []).map(referenceHalf)));

  // `shoal search` converts its query to float16 as the index records: every chunk ranked as float32 cosine ranks them.
  const text = 'fishing boats in the harbor';
  const searched = await runShoal(['search', text, '--index', index, '--k', String(NOTES.length)]);
  expect(searched.code, searched.stderr).toBe(0);
  const hits = parseJsonl(searched.stdout, Hit);
  const [queryVector = []] = (await engine.encode({ model: MODEL, items: [text], role: 'query' })).items.map((item) => item.dense ?? []);
  const expected = rows.map((row, i) => ({ source: row.source, score: cosine(queryVector, full[i] ?? []) })).sort((a, b) => b.score - a.score);
  expect(hits.map((hit) => hit.source)).toEqual(expected.map((hit) => hit.source));
  // Vectors and query rounded to half precision: scores agree to its resolution.
  hits.forEach((hit, i) => expect(Math.abs(hit.score - (expected[i]?.score ?? Number.NaN)), `#${i}`).toBeLessThan(2e-3));
}, 180_000);
