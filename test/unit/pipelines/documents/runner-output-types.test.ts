import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { JsonlStore } from '../../../../adapters/stores/file/store.js';
import { LanceDbStore } from '../../../../adapters/stores/lancedb/store.js';
import type { SearchHit, Store } from '../../../../adapters/stores/store.js';
import { parseDefinition } from '../../../../pipelines/documents/definition.js';
import { DocumentParser } from '../../../../pipelines/documents/parse.js';
import { IngestRunner } from '../../../../pipelines/documents/runner.js';
import { searchIndex } from '../../../../pipelines/documents/search.js';
import { fileSources } from '../../../../pipelines/documents/sources.js';
import { InferenceEngine } from '../../../../pipelines/inference/engine.js';
import { referencePackbits } from '../../../helpers/reference-quantize.js';
import { CONFORMANCE_DIR } from '../../../helpers/shared.js';

/**
 * The in-process runner with `encode: {dtype: ubinary, dimensions: 128}` against the same
 * pipeline in float32, on bench-minilm-l6 (MiniLM's real geometry): the index records the type
 * and the cut, stores the sign bits of each chunk's float32 vector's first 128 values (reference
 * packbits), the classify stage still labels from float32 vectors (same labels as the float32
 * run), and searchIndex converts its query the same way and finds the same chunk first.
 */

const ENCODER = join(CONFORMANCE_DIR, 'bench-minilm-l6');
const dir = await mkdtemp(join(tmpdir(), 'shoal-runner-types-'));
const engine = new InferenceEngine({ runtime: { intraOpThreads: 1 } });
afterAll(async () => {
  await engine.close();
  await rm(dir, { recursive: true, force: true });
});

const DOCS = {
  'weather.txt': 'Rain is expected in Paris on Monday. Bring an umbrella and a warm coat.',
  'cake.txt': 'Whisk the eggs with sugar. Bake the cake for forty minutes at 180 degrees.',
  'stocks.txt': 'The central bank raised interest rates and the stock market fell sharply.',
};
await Promise.all(Object.entries(DOCS).map(([name, text]) => writeFile(join(dir, name), text)));

async function ingest(sink: Store, encode: Record<string, unknown>): Promise<void> {
  const definition = parseDefinition(
    { name: 'typed', stages: { chunk: { size: 64, overlap: 0 }, encode: { model: ENCODER, ...encode }, classify: { labels: ['weather', 'cooking', 'finance'], threshold: -1, topK: 1 } } },
    'test',
  );
  const runner = new IngestRunner({ definition, engine, sink, reader: new DocumentParser(engine, { ocr: 'never' }) });
  const summary = await runner.run(await fileSources([dir], { include: ['*.txt'] }));
  expect(summary).toMatchObject({ documents: { ok: 3, failed: 0 }, chunks: 3 });
}

/** Every row of a sink by source, through a search wide enough to return them all. */
async function rowsBySource(sink: Store, query: number[]): Promise<Map<string, SearchHit['row']>> {
  return new Map((await sink.search(query, { k: 10 })).map((hit) => [hit.row.source, hit.row]));
}

it('ingests ubinary + dimensions vectors, classifies from float32, and searches with the same conversion', async () => {
  const plain = new JsonlStore({ dir: join(dir, 'plain') });
  const bits = new LanceDbStore({ dir: join(dir, 'bits') });
  await ingest(plain, {});
  await ingest(bits, { dtype: 'ubinary', dimensions: 128 });

  expect(await bits.describe()).toMatchObject({ dimension: 16, vectorType: 'ubinary', metadata: { model: ENCODER, dimensions: '128' } });
  expect((await plain.describe())?.vectorType).toBe('float32');

  // The float32 run's vectors (file://: plain JSON) against the packed rows read back by LanceDB.
  const plainRows = await rowsBySource(plain, new Array<number>(384).fill(0.01));
  const bitRows = await rowsBySource(bits, new Array<number>(16).fill(0));
  expect([...bitRows.keys()].sort()).toEqual([...plainRows.keys()].sort());
  const texts = [...plainRows.values()].map((row) => row.text);
  const encoded = await engine.encode({ model: ENCODER, items: texts, role: 'document' });
  for (const [i, row] of [...plainRows.values()].entries()) {
    const full = encoded.items[i]?.dense ?? [];
    // The sign bits of the first 128 values: renormalizing the cut never changes a sign.
    const [hit] = await bits.search(referencePackbits(full.slice(0, 128)), { k: 1, filter: `source = '${row.source.replaceAll("'", "''")}'` });
    expect(hit?.score, row.source).toBe(1);
    // Labels come from float32 vectors in both runs.
    expect(bitRows.get(row.source)?.labels, row.source).toBe(row.labels);
  }

  // Clear queries (a chunk's first sentence): 128 sign bits of a model not trained for binary
  // search keep only coarse neighbourhoods, too coarse for paraphrases on three short texts.
  for (const [query, source] of [['Rain is expected in Paris on Monday.', 'weather.txt'], ['Bake the cake for forty minutes.', 'cake.txt'], ['The central bank raised interest rates.', 'stocks.txt']] as const) {
    const [fromPlain] = await searchIndex(engine, plain, { query, k: 1, where: 'plain' });
    const [fromBits] = await searchIndex(engine, bits, { query, k: 1, where: 'bits' });
    expect(fromPlain?.row.source.endsWith(source), query).toBe(true);
    expect(fromBits?.row.source, query).toBe(fromPlain?.row.source);
  }
  await plain.close();
  await bits.close();
}, 120_000);
