import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ErrorCode } from '../../adapters/protocol/errors.js';
import { InferenceEngine } from '../../pipelines/inference/engine.js';
import { ingest, interruptedSummary, search, searchByDocument, type IngestProgress } from '../../services/library/index.js';
import { FIXTURES_DIR } from '../helpers/shared.js';

/**
 * `import { ingest, search, searchByDocument } from 'shoal'` in process (library-fresh-clone.test.ts runs them from a
 * packed tarball): progress callbacks, an AbortSignal that stops an ingest with the summary of what
 * finished (kept: the same call again continues), chunk options, and options refused by name.
 */

const MODEL = 'tiny-bert-mean';
/** Several waves of 256 chunks: the first is committed (and reported) before the last is read. */
const COUNT = 600;
const records = Array.from({ length: COUNT }, (_, i) => ({ id: `n${i}`, text: `Note ${i}: the ferry leaves pier ${i % 7} at ${i % 12} o'clock.` }));

describe('shoal library: ingest and search', () => {
  let dir: string;
  let engine: InferenceEngine;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'shoal-library-docs-'));
    engine = new InferenceEngine({ sources: { modelDirs: [join(FIXTURES_DIR, 'models')], allowDownload: false }, runtime: { intraOpThreads: 1 } });
  });
  afterAll(async () => {
    await engine.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('an aborted ingest rejects with CANCELLED and the summary of what finished; the same call again does the rest', async () => {
    const index = join(dir, 'aborted');
    const controller = new AbortController();
    const seen: IngestProgress[] = [];
    const stopped = await ingest(engine, {
      records,
      index,
      model: MODEL,
      chunkSize: 16,
      signal: controller.signal,
      onProgress: (progress) => {
        seen.push(progress);
        // Past the first wave: it is encoded and committed on the way out, the rest is not reached.
        if (progress.read >= 300) controller.abort();
      },
    }).then(
      () => null,
      (error: unknown) => error,
    );
    expect(stopped).toMatchObject({ code: ErrorCode.CANCELLED });
    const partial = interruptedSummary(stopped);
    expect(partial?.documents.total).toBe(COUNT);
    const done = partial?.documents.ok ?? 0;
    expect(done).toBeGreaterThan(0);
    expect(done).toBeLessThan(COUNT);
    expect(seen.at(-1)?.total).toBe(COUNT);
    const rest = await ingest(engine, { records, index, model: MODEL, chunkSize: 16 });
    expect(rest.documents).toEqual({ total: COUNT, ok: COUNT - done, failed: 0, unchanged: done });
    expect(rest).toMatchObject({ index, table: 'chunks', pipeline: 'documents' });
    const hits = await search(engine, { index, query: 'ferry pier', k: 5 });
    expect(hits.map((hit) => hit.rank)).toEqual([1, 2, 3, 4, 5]);
    expect(new Set(hits.map((hit) => hit.source)).size).toBe(5);
    const filtered = await search(engine, { index, query: 'ferry', k: 50, filter: "source = 'n3'" });
    expect(filtered.map((hit) => hit.source)).toEqual(['n3']);
    // Grouped by document (shoal search --group-by document): k counts documents, each once, its chunks
    // ranked as the plain search ranks them.
    const documents = await searchByDocument(engine, { index, query: 'ferry pier', k: 3 });
    expect(documents.map((document) => document.rank)).toEqual([1, 2, 3]);
    expect(new Set(documents.map((document) => document.source)).size).toBe(3);
    const ranked = await search(engine, { index, query: 'ferry pier', k: 50 });
    for (const document of documents) {
      expect(document.hits.length).toBeGreaterThan(0);
      for (const hit of document.hits) expect(hit).toEqual(ranked[hit.rank - 1]);
      expect(document.score).toBe(document.hits[0]?.score);
    }
  }, 60_000);

  it('refuses wrong options by name, and a search of an empty place is NOT_FOUND', async () => {
    await expect(search(engine, { index: join(dir, 'none'), query: 'x' })).rejects.toMatchObject({ code: ErrorCode.NOT_FOUND });
    await expect(search(engine, { index: join(dir, 'none'), query: 'x', k: 0 })).rejects.toMatchObject({ code: ErrorCode.INVALID_INPUT, message: expect.stringContaining('k') });
    await expect(search(engine, { index: join(dir, 'none'), query: '  ' })).rejects.toMatchObject({ code: ErrorCode.INVALID_INPUT, message: expect.stringContaining('the query is empty') });
    await expect(ingest(engine, { records: [{ id: 'a', text: 'x' }], index: join(dir, 'bad'), chunkSize: 4 })).rejects.toMatchObject({ code: ErrorCode.INVALID_INPUT, message: expect.stringContaining('chunkSize') });
    await expect(ingest(engine, { records: [{ id: 'a', text: 'x' }, { id: 'a', text: 'y' }], index: join(dir, 'bad') })).rejects.toMatchObject({ code: ErrorCode.INVALID_INPUT, message: 'records[1]: duplicate id "a"' });
    await expect(ingest(engine, { index: join(dir, 'bad') })).rejects.toMatchObject({ code: ErrorCode.INVALID_INPUT, message: expect.stringContaining('nothing to ingest') });
  }, 30_000);
});
