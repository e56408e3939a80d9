import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ShoalMetrics } from '../../adapters/observability/metrics.js';
import { InferenceEngine } from '../../pipelines/inference/engine.js';
import { buildGatewayApp } from '../../services/gateway/app.js';
import { TEST_SETTINGS } from '../helpers/gateway.js';
import { CONFORMANCE_DIR } from '../helpers/shared.js';
import { parseJsonl } from '../helpers/shoal-cli.js';
import { shoalInProcess } from '../helpers/shoal-in-process.js';

/**
 * `shoal search --mode text|hybrid`, `--group-by document` and the hit fields, through the CLI
 * (in process) and POST /v1/search over the same LanceDB index, built by `shoal ingest` with the
 * conformance kit's random-weight encoder: its dense ranking is arbitrary, so what the text leg
 * contributes is visible. Hybrid is checked to be exactly the reciprocal rank fusion (k = 60) of
 * the dense and text rankings the CLI prints on their own; grouping to be exactly the ungrouped
 * ranking folded per document. An index on a store without full-text search (file://) refuses
 * text mode (UNSUPPORTED_OPERATION, HTTP 400) and hybrid without a second leg (INVALID_INPUT, 422).
 */

const MODEL = join(CONFORMANCE_DIR, 'bert-mean-embed');
const root = await mkdtemp(join(tmpdir(), 'shoal-search-modes-'));
const docs = join(root, 'docs');
const index = join(root, 'index');
const fileIndex = `file://${join(root, 'files')}`;
const engine = new InferenceEngine({ runtime: { intraOpThreads: 1 } });
let app: FastifyInstance;

const NOTES: Record<string, string> = {
  'harbor.txt': 'The harbor master counts forty fishing boats every morning before sunrise.',
  'bakery.txt': 'The bakery on Elm Street sells rye bread, croissants and a famous cardamom bun.',
  'greenhouse.txt': 'The greenhouse keeps zygomorphic orchids under shade cloth all summer.',
  'glacier.txt': 'Measurements show the glacier retreated eleven meters over the last summer season.',
  'lighthouse.txt': 'A lighthouse keeper logs the weather at noon.',
};
/** Several chunks (at --chunk-size 24), most about the lighthouse, under two headings. */
const MANUAL = [
  '# Lighthouse keeping',
  '',
  'The lighthouse lamp is lit at dusk and the lighthouse keeper trims the wick every four hours through the night.',
  '',
  'The lighthouse keeper climbs one hundred and twelve steps to reach the lamp room at the top of the tower.',
  '',
  '## Supplies',
  '',
  'Paraffin, spare wicks and lens cloths arrive by boat on the first Monday of every month for the lighthouse.',
  '',
].join('\n');

const Hit = z.strictObject({
  rank: z.number().int(), score: z.number(), id: z.string(), document_id: z.string(), source: z.string(), page: z.number().int(), text: z.string(),
  heading: z.string().nullable(), chunk: z.number().int(), start: z.number().int(), end: z.number().int(),
  metadata: z.record(z.string(), z.unknown()).nullable(),
});
type Hit = z.output<typeof Hit>;
const DocumentLine = z.strictObject({ rank: z.number().int(), score: z.number(), document_id: z.string(), source: z.string(), hits: z.array(Hit) });

beforeAll(async () => {
  await mkdir(docs);
  for (const [name, text] of Object.entries(NOTES)) await writeFile(join(docs, name), text);
  await writeFile(join(docs, 'manual.md'), MANUAL);
  for (const target of [index, fileIndex]) {
    const run = await shoalInProcess(['ingest', '--no-progress', '--model', MODEL, '--chunk-size', '24', '--index', target, docs]);
    expect(run.code, run.stderr).toBe(0);
  }
  app = buildGatewayApp(
    { engine, jobs: null, models: async () => [], metrics: new ShoalMetrics({ processMetrics: false }), ready: async () => ({ ready: true }) },
    { ...TEST_SETTINGS, indexes: { notes: index, files: fileIndex } },
  );
  await app.ready();
}, 180_000);
afterAll(async () => {
  await app?.close();
  await engine.close();
  await rm(root, { recursive: true, force: true });
});

async function search(args: readonly string[], target = index): Promise<Hit[]> {
  const run = await shoalInProcess(['search', '--index', target, ...args]);
  expect(run.code, run.stderr).toBe(0);
  return parseJsonl(run.stdout, Hit);
}

const post = (payload: Record<string, unknown>) => app.inject({ method: 'POST', url: '/v1/search', payload: { index: 'notes', ...payload } });

describe('--mode text', () => {
  it('ranks the chunk holding a known phrase first, every hit with its heading, chunk number and offsets; HTTP answers the same lines', async () => {
    const hits = await search(['cardamom bun rye', '--mode', 'text']);
    // Only the bakery note has any of these words (stop words aside).
    expect(hits.map((hit) => hit.source)).toEqual([join(docs, 'bakery.txt')]);
    expect(hits[0]).toMatchObject({ rank: 1, text: NOTES['bakery.txt'], heading: null, chunk: 0, start: 0, end: NOTES['bakery.txt']?.length, page: 1 });
    expect(hits[0]?.score).toBeGreaterThan(0);

    const lighthouse = await search(['lighthouse keeper', '--mode', 'text', '--k', '10']);
    expect(new Set(lighthouse.map((hit) => hit.source))).toEqual(new Set([join(docs, 'lighthouse.txt'), join(docs, 'manual.md')]));
    expect([...lighthouse].sort((a, b) => b.score - a.score)).toEqual(lighthouse);
    // The manual's chunks carry their heading and where they are in the file.
    const manual = lighthouse.filter((hit) => hit.source === join(docs, 'manual.md'));
    expect(manual.length).toBeGreaterThan(1);
    const text = await readFile(join(docs, 'manual.md'), 'utf8');
    for (const hit of manual) {
      expect(hit.heading).toMatch(/^(Lighthouse keeping|Supplies)$/);
      expect(hit.end).toBeGreaterThan(hit.start);
      expect(text.slice(hit.start, hit.end).replace(/\s+/g, ' ').trim()).toBe(hit.text.replace(/\s+/g, ' ').trim());
    }
    expect(new Set(manual.map((hit) => hit.chunk)).size).toBe(manual.length);

    const answer = await post({ query: 'lighthouse keeper', mode: 'text', k: 10 });
    expect(answer.statusCode, answer.body).toBe(200);
    expect(answer.json()).toEqual({ hits: lighthouse });
  });

  it('a filter narrows the text ranking', async () => {
    const hits = await search(['lighthouse', '--mode', 'text', '--filter', "source LIKE '%manual%'"]);
    expect(hits.length).toBeGreaterThan(1);
    expect(hits.every((hit) => hit.source === join(docs, 'manual.md'))).toBe(true);
  });
});

describe('--mode hybrid', () => {
  it('is the reciprocal rank fusion (k = 60) of the dense and the text ranking, so a lexical-only match surfaces with a random-weight encoder', async () => {
    const query = 'zygomorphic orchids';
    const dense = await search([query, '--mode', 'dense', '--k', '100']);
    const text = await search([query, '--mode', 'text', '--k', '100']);
    expect(text.map((hit) => hit.source)).toEqual([join(docs, 'greenhouse.txt')]);
    const hybrid = await search([query, '--mode', 'hybrid', '--k', '5']);
    const fused = new Map<string, number>();
    for (const list of [dense, text]) list.forEach((hit, i) => fused.set(hit.id, (fused.get(hit.id) ?? 0) + 1 / (60 + i + 1)));
    const expected = [...fused].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1)).slice(0, 5);
    expect(hybrid.map((hit) => hit.id)).toEqual(expected.map(([id]) => id));
    hybrid.forEach((hit, i) => expect(hit.score).toBeCloseTo(expected[i]?.[1] ?? Number.NaN, 6));
    // The greenhouse chunk: first in the text ranking, anywhere in the dense one; fused, it is at worst second.
    const greenhouse = text[0]?.id;
    expect(hybrid.findIndex((hit) => hit.id === greenhouse)).toBeLessThanOrEqual(1);
    expect(hybrid.findIndex((hit) => hit.id === greenhouse)).toBeLessThanOrEqual(dense.findIndex((hit) => hit.id === greenhouse));

    const answer = await post({ query, mode: 'hybrid', k: 5 });
    expect(answer.statusCode, answer.body).toBe(200);
    expect(answer.json()).toEqual({ hits: hybrid });
  });

  it('takes a pasted page: the text leg ranks by its first 4,096 characters, while text mode alone refuses it', async () => {
    const page = `zygomorphic orchids ${'and so on '.repeat(1_000)}`;
    const hybrid = await search([page, '--mode', 'hybrid', '--k', '3']);
    expect(hybrid).toHaveLength(3);
    expect(hybrid.some((hit) => hit.source === join(docs, 'greenhouse.txt'))).toBe(true);
    const text = await shoalInProcess(['search', page, '--index', index, '--mode', 'text']);
    expect(text.code).toBe(2);
    expect(text.stderr.trim()).toBe(`error [INVALID_INPUT]: the text query has ${page.length} characters, at most 4096`);
  });

  it('is not the default of a dense-only index: dense stays the default', async () => {
    expect(await search(['zygomorphic orchids', '--k', '100'])).toEqual(await search(['zygomorphic orchids', '--mode', 'dense', '--k', '100']));
  });
});

describe('--group-by document', () => {
  it('folds the ranking per document: k documents, each scored by its best chunk, its best chunks (at most 3) listed with their ranks', async () => {
    const ungrouped = await search(['lighthouse lamp keeper boat', '--mode', 'text', '--k', '100']);
    const run = await shoalInProcess(['search', 'lighthouse lamp keeper boat', '--index', index, '--mode', 'text', '--group-by', 'document', '--k', '2']);
    expect(run.code, run.stderr).toBe(0);
    const documents = parseJsonl(run.stdout, DocumentLine);
    expect(documents).toHaveLength(2);
    const sources = [...new Set(ungrouped.map((hit) => hit.source))].slice(0, 2);
    expect(documents.map((document) => document.source)).toEqual(sources);
    documents.forEach((document, i) => {
      const chunks = ungrouped.filter((hit) => hit.source === document.source).slice(0, 3);
      expect(document).toMatchObject({ rank: i + 1, score: chunks[0]?.score, document_id: chunks[0]?.document_id });
      expect(document.hits).toEqual(chunks);
    });
    // The manual has several matching chunks: more than one listed, never more than three.
    const manual = documents.find((document) => document.source === join(docs, 'manual.md'));
    expect(manual?.hits.length).toBeGreaterThan(1);
    expect(manual?.hits.length).toBeLessThanOrEqual(3);

    const answer = await post({ query: 'lighthouse lamp keeper boat', mode: 'text', group_by: 'document', k: 2 });
    expect(answer.statusCode, answer.body).toBe(200);
    expect(answer.json()).toEqual({ documents });
    const bad = await post({ query: 'lighthouse', group_by: 'chunk' });
    expect(bad.statusCode).toBe(422);
    // Grouped and reranked, each document asked for hands the reranker 20 candidates: k is bounded at 25 (512 candidates).
    const tooMany = await post({ query: 'lighthouse', group_by: 'document', rerank: 'some/cross-encoder', k: 26 });
    expect(tooMany.statusCode, tooMany.body).toBe(413);
    expect(tooMany.json<{ error: { code: string; details?: Record<string, unknown> } }>().error).toMatchObject({ code: 'INPUT_TOO_LARGE', details: { field: 'k', limit: 25 } });
  });

  it('counts documents, not chunks, in dense mode too: k = 6 gives all six documents once each', async () => {
    const run = await shoalInProcess(['search', 'weather', '--index', index, '--group-by', 'document', '--k', '6']);
    expect(run.code, run.stderr).toBe(0);
    const documents = parseJsonl(run.stdout, DocumentLine);
    expect(documents.map((document) => document.source).sort()).toEqual([...Object.keys(NOTES), 'manual.md'].map((name) => join(docs, name)).sort());
    expect(documents.map((document) => document.rank)).toEqual([1, 2, 3, 4, 5, 6]);
    expect([...documents].sort((a, b) => b.score - a.score).map((document) => document.source)).toEqual(documents.map((document) => document.source));
  });
});

describe('a store that cannot rank by text (file://)', () => {
  it('refuses --mode text naming the stores that can (CLI, and HTTP 400 UNSUPPORTED_OPERATION), and hybrid without a sparse or text leg (422)', async () => {
    const run = await shoalInProcess(['search', 'cardamom', '--index', fileIndex, '--mode', 'text']);
    expect(run.code).not.toBe(0);
    expect(run.stderr.trim()).toMatch(/^error \[UNSUPPORTED_OPERATION\]: --mode text needs a store that ranks chunks by their text, LanceDB \(the default, a folder\) or pgvector \(postgres:\/\/\)/);
    // Dense search of the same index works.
    expect(await search(['cardamom', '--k', '2'], fileIndex)).toHaveLength(2);

    const answer = await post({ index: 'files', query: 'cardamom', mode: 'text' });
    expect(answer.statusCode, answer.body).toBe(400);
    const error = answer.json<{ error: { code: string; message: string; details?: { field?: string } } }>().error;
    expect(error.code).toBe('UNSUPPORTED_OPERATION');
    expect(error.message).toMatch(/^mode text needs a store that ranks chunks by their text, LanceDB .* or pgvector/);
    expect(error.details?.field).toBe('mode');

    const hybrid = await post({ index: 'files', query: 'cardamom', mode: 'hybrid' });
    expect(hybrid.statusCode, hybrid.body).toBe(422);
    expect(hybrid.json<{ error: { code: string; message: string } }>().error).toMatchObject({ code: 'INVALID_INPUT', message: expect.stringMatching(/^mode hybrid fuses the dense ranking with a sparse or a full-text one/) });
  });
});
