import { mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ErrorCode } from '../../../../adapters/protocol/errors.js';
import { JsonlStore } from '../../../../adapters/stores/file/store.js';
import { parseDefinition } from '../../../../pipelines/documents/definition.js';
import { DocumentParser } from '../../../../pipelines/documents/parse.js';
import { IngestRunner } from '../../../../pipelines/documents/runner.js';
import { fileSources, recordSource, type PendingSource } from '../../../../pipelines/documents/sources.js';
import { InferenceEngine } from '../../../../pipelines/inference/engine.js';
import { CONFORMANCE_DIR } from '../../../helpers/shared.js';

/**
 * The runner stores each document's metadata with every one of its chunks: a file's automatic
 * fields, a record's own, and a document job's, whose looser wire schema lets through keys the
 * store cannot take: that document alone fails with INVALID_INPUT.
 */

const ENCODER = join(CONFORMANCE_DIR, 'bench-minilm-l6');
const dir = await mkdtemp(join(tmpdir(), 'shoal-runner-metadata-'));
const engine = new InferenceEngine({ runtime: { intraOpThreads: 1 } });
afterAll(async () => {
  await engine.close();
  await rm(dir, { recursive: true, force: true });
});

describe('IngestRunner metadata', () => {
  it('stores file, record and job metadata on every chunk, and fails alone a document whose metadata breaks the bounds', async () => {
    const file = join(dir, 'notes.md');
    await writeFile(file, `---\ntitle: Harbour notes\n---\n# Tides\n\n${'The tide turns twice a day in the harbour. '.repeat(40)}`);
    const definition = parseDefinition({ name: 'meta', stages: { chunk: { size: 64, overlap: 0 }, encode: { model: ENCODER }, write: { index: `file://${join(dir, 'index')}` } } }, 'test');
    const sink = new JsonlStore({ dir: join(dir, 'index') });
    const parser = new DocumentParser(engine, { ocr: 'never' });
    // As document-jobs.ts builds a job's source: its metadata rides on the loaded source.
    const job = (id: string, metadata: Record<string, string | number>): PendingSource => ({ uri: id, load: async () => ({ source: { uri: id, id, text: `${id} is about ferries.`, metadata }, bytes: new TextEncoder().encode(id) }) });
    try {
      const runner = new IngestRunner({ definition, engine, sink, reader: parser });
      const sources = [
        ...(await fileSources([file])),
        recordSource({ id: 'rec', text: 'A record about pilots.', metadata: { year: 2024, tags: ['pilots'] } }, dir),
        job('job-ok', { n: 1 }),
        job('job-bad', { 'my-key': 1 }),
      ];
      const summary = await runner.run(sources);
      expect(summary.documents).toEqual({ total: 4, ok: 3, failed: 1, unchanged: 0 });
      expect(summary.failed).toEqual([{ source: 'job-bad', code: ErrorCode.INVALID_INPUT, reason: expect.stringContaining('job-bad: metadata field "my-key" is not a name') }]);

      const hits = await sink.search(Array.from({ length: 384 }, () => 1), { k: 100 });
      const bySource = new Map<string, unknown[]>();
      for (const hit of hits) bySource.set(hit.row.source, [...(bySource.get(hit.row.source) ?? []), hit.row.metadata]);
      const fileChunks = bySource.get(file) ?? [];
      expect(fileChunks.length).toBeGreaterThan(1);
      const info = await stat(file);
      for (const metadata of fileChunks) expect(metadata).toEqual({ title: 'Harbour notes', mtime: info.mtime.toISOString(), size: info.size, mime: 'text/markdown' });
      expect(bySource.get('rec')).toEqual([{ year: 2024, tags: ['pilots'] }]);
      expect(bySource.get('job-ok')).toEqual([{ n: 1 }]);
      expect(bySource.has('job-bad')).toBe(false);
    } finally {
      await parser.close();
      await sink.close();
    }
  }, 120_000);
});
