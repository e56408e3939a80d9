import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as lancedb from '@lancedb/lancedb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ErrorCode } from '../../adapters/protocol/errors.js';
import { JsonlStore } from '../../adapters/stores/file/store.js';
import { LanceDbStore } from '../../adapters/stores/lancedb/store.js';
import { parseDefinition, type PipelineDefinition } from '../../pipelines/documents/definition.js';
import { DocumentParser } from '../../pipelines/documents/parse.js';
import { IngestRunner } from '../../pipelines/documents/runner.js';
import { searchIndex } from '../../pipelines/documents/search.js';
import { fileSources } from '../../pipelines/documents/sources.js';
import { InferenceEngine } from '../../pipelines/inference/engine.js';
import { CONFORMANCE_DIR, FIXTURES_DIR } from '../helpers/shared.js';

/**
 * A pipeline with dense, sparse (SPLADE) and multi-vector (ColBERT) encoders, the conformance
 * kit's random-weight models, into LanceDB: the stored token vectors are the engine's own, and
 * search returns the fused candidates in the order of a MaxSim worked out here from the engine's
 * query and document token vectors. A backend without multi-vectors refuses the pipeline.
 */

const DENSE = join(CONFORMANCE_DIR, 'bert-mean-embed');
const SPLADE = join(CONFORMANCE_DIR, 'bert-splade');
const COLBERT = join(CONFORMANCE_DIR, 'bert-colbert');
const TEXTS = [
  'The pilot boat leaves the harbour at dawn and returns before the tide turns.',
  'Whisk the eggs with sugar, fold in the flour and bake the sponge for forty minutes.',
  'Quarterly revenue grew by eleven percent while operating costs stayed flat.',
  'Prune the roses in late winter and mulch the beds before the first frost.',
];
const QUERY = 'when does the pilot boat come back?';

const engine = new InferenceEngine({ runtime: { intraOpThreads: 1 } });
let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'shoal-ingest-multivector-'));
  await Promise.all(TEXTS.map((text, i) => writeFile(join(dir, `doc${i}.txt`), text)));
});
afterAll(async () => {
  await engine.close();
  await rm(dir, { recursive: true, force: true });
});

const definition = (index: string): PipelineDefinition =>
  parseDefinition({ name: 'late', stages: { parse: { ocr: 'never' }, encode: { model: DENSE, sparse: { model: SPLADE }, multivector: { model: COLBERT } }, write: { index } } }, 'test');

async function tokens(texts: readonly string[], role: 'query' | 'document'): Promise<number[][][]> {
  const result = await engine.encode({ model: COLBERT, items: texts.map((text) => ({ text })), output_types: ['multivector'], role });
  return texts.map((_, i) => result.items.find((item) => item.index === i)?.multivector ?? []);
}

function maxSim(query: readonly number[][], document: readonly number[][]): number {
  const cosine = (a: readonly number[], b: readonly number[]): number => a.reduce((sum, value, i) => sum + value * (b[i] ?? 0), 0) / (Math.hypot(...a) * Math.hypot(...b));
  return query.reduce((sum, q) => sum + Math.max(...document.map((d) => cosine(q, d))), 0);
}

describe('ingest with a multi-vector encoder, late-interaction search', () => {
  it('LanceDB: stores the engine token vectors and rescores the fused candidates by MaxSim', async () => {
    const index = join(dir, 'lance');
    const sink = new LanceDbStore({ dir: index });
    const parser = new DocumentParser(engine, { ocr: 'never' });
    try {
      const summary = await new IngestRunner({ definition: definition(index), engine, sink, reader: parser }).run(await fileSources([dir], { include: ['*.txt'] }));
      expect(summary.documents).toMatchObject({ ok: 4, failed: 0 });
      const spec = await sink.describe();
      expect(spec).toMatchObject({ optionalColumns: ['sparse', 'multivector'], metadata: { multivector_model: COLBERT } });

      const db = await lancedb.connect(index);
      const table = await db.openTable('chunks');
      const raw: unknown[] = await table.query().select(['text', 'multivector']).toArray();
      table.close();
      db.close();
      const Tokens = z.custom<Iterable<Iterable<number>>>((value) => typeof value === 'object' && value !== null && Symbol.iterator in value).transform((value) => Array.from(value, (token) => Array.from(token)));
      const stored = raw.map((row) => z.object({ text: z.string(), multivector: Tokens }).parse(row));
      const expected = await tokens(stored.map((row) => row.text), 'document');
      stored.forEach((row, i) => {
        expect(row.multivector.length).toBe(expected[i]?.length);
        expect(row.multivector.length).toBeGreaterThan(1);
        row.multivector.forEach((token, t) => token.forEach((value, d) => expect(value).toBeCloseTo(expected[i]?.[t]?.[d] ?? Number.NaN, 5)));
      });

      // Every chunk is a candidate here (fewer than the 50 taken), so the order is MaxSim's over all of them.
      const [queryTokens] = await tokens([QUERY], 'query');
      const byText = new Map(stored.map((row) => [row.text, maxSim(queryTokens ?? [], row.multivector)]));
      const want = [...byText].sort((a, b) => b[1] - a[1]);
      const hits = await searchIndex(engine, sink, { query: QUERY, k: 3, where: 'test' });
      expect(hits.map((hit) => hit.row.text)).toEqual(want.slice(0, 3).map(([text]) => text));
      hits.forEach((hit, i) => expect(hit.score).toBeCloseTo(want[i]?.[1] ?? Number.NaN, 4));

      // The same index with an encode stage that lacks the multi-vector (or sparse) model is refused before any work.
      for (const encode of [{ model: DENSE, sparse: { model: SPLADE } }, { model: DENSE, multivector: { model: COLBERT } }]) {
        const other = parseDefinition({ name: 'late', stages: { parse: { ocr: 'never' }, encode, write: { index } } }, 'test');
        const rerun = new IngestRunner({ definition: other, engine, sink, reader: parser, force: true });
        await expect(rerun.run(await fileSources([dir], { include: ['*.txt'] }))).rejects.toMatchObject({ code: ErrorCode.CONFIG_INVALID, message: expect.stringMatching(/built with (multi-vector|sparse) model/) });
      }
    } finally {
      await parser.close();
      await sink.close();
    }
  });

  it('searches the dense column by name when the token vectors have the same width (the fixture models: 8 and 8)', async () => {
    const models = join(FIXTURES_DIR, 'models');
    const index = join(dir, 'same-width');
    const sink = new LanceDbStore({ dir: index });
    const parser = new DocumentParser(engine, { ocr: 'never' });
    const same = parseDefinition(
      { name: 'same', stages: { parse: { ocr: 'never' }, encode: { model: join(models, 'tiny-bert-mean'), multivector: { model: join(models, 'tiny-colbert') } }, write: { index } } },
      'test',
    );
    try {
      const summary = await new IngestRunner({ definition: same, engine, sink, reader: parser }).run(await fileSources([dir], { include: ['*.txt'] }));
      expect(summary.documents).toMatchObject({ ok: 4, failed: 0 });
      // LanceDB refused a search naming no column: "More than one vector columns found".
      const hits = await searchIndex(engine, sink, { query: QUERY, k: 4, where: 'test' });
      expect(new Set(hits.map((hit) => hit.row.text))).toEqual(new Set(TEXTS));
      const dense = await searchIndex(engine, sink, { query: QUERY, k: 4, where: 'test', mode: 'dense' });
      expect(dense).toHaveLength(4);
    } finally {
      await parser.close();
      await sink.close();
    }
  });

  it('a backend without multi-vectors refuses the pipeline before writing anything', async () => {
    const index = join(dir, 'jsonl');
    const sink = new JsonlStore({ dir: index });
    const parser = new DocumentParser(engine, { ocr: 'never' });
    try {
      const runner = new IngestRunner({ definition: definition(index), engine, sink, reader: parser });
      await expect(runner.run(await fileSources([dir], { include: ['*.txt'] }))).rejects.toMatchObject({ code: ErrorCode.UNSUPPORTED_OPERATION });
      expect(await sink.describe()).toBeNull();
    } finally {
      await parser.close();
      await sink.close();
    }
  });
});
