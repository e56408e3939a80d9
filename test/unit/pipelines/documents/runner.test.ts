import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { Engine } from '../../../../adapters/protocol/engine.js';
import { ErrorCode, ShoalError } from '../../../../adapters/protocol/errors.js';
import type { EncodeRequest, TokenizeRequest } from '../../../../adapters/protocol/requests.js';
import type { EncodeResult, TokenizeResult } from '../../../../adapters/protocol/results.js';
import { JsonlStore } from '../../../../adapters/stores/file/store.js';
import { LanceDbStore } from '../../../../adapters/stores/lancedb/store.js';
import { parseDefinition } from '../../../../pipelines/documents/definition.js';
import { interruptedSummary } from '../../../../pipelines/documents/interrupted.js';
import { DocumentParser } from '../../../../pipelines/documents/parse.js';
import { IngestRunner, type IngestProgress } from '../../../../pipelines/documents/runner.js';
import { fileSources } from '../../../../pipelines/documents/sources.js';
import { cosine } from '../../../helpers/tiny-model.js';
import { InferenceEngine } from '../../../../pipelines/inference/engine.js';
import { CONFORMANCE_DIR } from '../../../helpers/shared.js';

/**
 * The in-process runner with its optional stages: the real parser, engine and LanceDB. The
 * stored entities and labels are checked against the engine's own answers for the same chunk
 * texts (extract) and against cosine similarities computed here (classify).
 */

const ENCODER = join(CONFORMANCE_DIR, 'bench-minilm-l6');
const GLINER = join(CONFORMANCE_DIR, 'gliner-span');
const LABELS = ['weather', 'cooking', 'finance'];
const dir = await mkdtemp(join(tmpdir(), 'shoal-runner-'));
const engine = new InferenceEngine({ runtime: { intraOpThreads: 1 } });
afterAll(async () => {
  await engine.close();
  await rm(dir, { recursive: true, force: true });
});

await writeFile(join(dir, 'one.txt'), 'Rain is expected in Paris on Monday. Bring an umbrella.');
await writeFile(join(dir, 'two.txt'), 'Whisk the eggs with sugar. Bake the cake for forty minutes.');


describe('IngestRunner', () => {
  it('an extract model it cannot run fails the run before any document is parsed', async () => {
    const definition = parseDefinition(
      { name: 'broken-extract', stages: { encode: { model: ENCODER }, extract: { model: join(CONFORMANCE_DIR, 'no-such-extractor'), labels: ['city'] }, write: { index: join(dir, 'never') } } },
      'test',
    );
    const sink = new LanceDbStore({ dir: join(dir, 'never') });
    let parsed = 0;
    const parser = new DocumentParser(engine, { ocr: 'never' });
    const counting = { parse: (source: Parameters<DocumentParser['parse']>[0]) => ((parsed += 1), parser.parse(source)) };
    try {
      const runner = new IngestRunner({ definition, engine, sink, reader: counting });
      await expect(runner.run(await fileSources([dir], { include: ['*.txt'] }))).rejects.toMatchObject({ code: ErrorCode.MODEL_NOT_FOUND });
      expect(parsed).toBe(0);
      expect(await sink.describe()).toBeNull();
    } finally {
      await parser.close();
      await sink.close();
    }
  });

  it('runs extract and classify and stores their JSON per chunk', async () => {
    const definition = parseDefinition(
      {
        name: 'enriched',
        stages: {
          chunk: { size: 64, overlap: 0 },
          encode: { model: ENCODER },
          extract: { model: GLINER, labels: ['city', 'day'], threshold: 0 },
          classify: { labels: LABELS, threshold: -1, topK: 2 },
          write: { index: join(dir, 'index') },
        },
      },
      'test',
    );
    const sink = new LanceDbStore({ dir: join(dir, 'index') });
    const parser = new DocumentParser(engine, { ocr: 'never' });
    const progress: IngestProgress[] = [];
    try {
      const runner = new IngestRunner({ definition, engine, sink, reader: parser, onProgress: (p) => progress.push(p) });
      const summary = await runner.run(await fileSources([dir], { include: ['*.txt'] }));
      expect(summary).toMatchObject({ documents: { total: 2, ok: 2, failed: 0, unchanged: 0 }, pages: 2, chunks: 2 });
      expect(progress.at(-1)).toMatchObject({ total: 2, done: 2, read: 2, pages: 2, chunks: 2 });
      expect(await sink.describe()).toMatchObject({ dimension: 384, optionalColumns: ['entities', 'labels'], metadata: { model: ENCODER, pipeline: 'enriched' } });

      const hits = await sink.search(new Array<number>(384).fill(0.01), { k: 10 });
      expect(hits).toHaveLength(2);
      const texts = hits.map((hit) => hit.row.text);
      const entities = await engine.extract({ model: GLINER, items: texts.map((text) => ({ text })), labels: ['city', 'day'], threshold: 0 });
      const vectors = await engine.encode({ model: ENCODER, items: [...texts, ...LABELS].map((text) => ({ text })), role: 'document' });
      hits.forEach((hit, i) => {
        expect(JSON.parse(hit.row.entities ?? 'null')).toEqual(entities.items[i]?.entities);
        const chunkVector = vectors.items[i]?.dense ?? [];
        const expected = LABELS.map((label, l) => ({ label, score: cosine(chunkVector, vectors.items[texts.length + l]?.dense ?? []) }))
          .sort((a, b) => b.score - a.score)
          .slice(0, 2);
        const stored = labelEntries(JSON.parse(hit.row.labels ?? 'null'));
        expect(stored.map((entry) => entry.label)).toEqual(expected.map((entry) => entry.label));
        stored.forEach((entry, k) => expect(entry.score).toBeCloseTo(expected[k]?.score ?? Number.NaN, 4));
      });
    } finally {
      await parser.close();
      await sink.close();
    }
  });

  it('tells onIndexing around the closing optimize(), even when it fails (a stall watch does not count the index build)', async () => {
    const definition = parseDefinition({ name: 'plain', stages: { chunk: { size: 64, overlap: 0 }, encode: { model: ENCODER }, write: { index: join(dir, 'indexing') } } }, 'test');
    const events: string[] = [];
    let failBuild = false;
    class RecordingStore extends LanceDbStore {
      override async optimize(): Promise<void> {
        events.push('optimize');
        if (failBuild) throw new ShoalError(ErrorCode.UNAVAILABLE, 'the index build failed');
        await super.optimize();
      }
    }
    const parser = new DocumentParser(engine, { ocr: 'never' });
    try {
      for (const failing of [false, true]) {
        failBuild = failing;
        events.length = 0;
        const sink = new RecordingStore({ dir: join(dir, 'indexing') });
        try {
          const runner = new IngestRunner({ definition, engine, sink, reader: parser, force: true, onOutcome: () => events.push('outcome'), onIndexing: (running) => events.push(running ? 'indexing' : 'indexed') });
          const run = runner.run(await fileSources([dir], { include: ['*.txt'] }));
          if (failing) await expect(run).rejects.toMatchObject({ code: ErrorCode.UNAVAILABLE });
          else await run;
          expect(events).toEqual(['outcome', 'outcome', 'indexing', 'optimize', 'indexed']);
        } finally {
          await sink.close();
        }
      }
    } finally {
      await parser.close();
    }
  });

  it('an aborted run throws CANCELLED and records no document as failed', async () => {
    const definition = parseDefinition({ name: 'plain', stages: { encode: { model: ENCODER } } }, 'test');
    const sink = new LanceDbStore({ dir: join(dir, 'aborted') });
    const parser = new DocumentParser(engine, { ocr: 'never' });
    const controller = new AbortController();
    controller.abort();
    try {
      const runner = new IngestRunner({ definition, engine, sink, reader: parser, signal: controller.signal });
      const sources = await fileSources([dir]);
      const error: unknown = await runner.run(sources).catch((thrown: unknown) => thrown);
      expect(error).toMatchObject({ code: ErrorCode.CANCELLED });
      expect(await sink.states([join(dir, 'one.txt')])).toEqual(new Map());
      // The error carries the summary so far: nothing was reached, so nothing is counted.
      const summary = interruptedSummary(error);
      expect(summary).toMatchObject({ documents: { total: sources.length, ok: 0, failed: 0, unchanged: 0 }, failed: [], pages: 0, ocrPages: 0, chunks: 0 });
      expect(summary?.seconds).toBeGreaterThan(0);
    } finally {
      await parser.close();
      await sink.close();
    }
  });
});

/** One token per word, a fixed 4-dimensional vector per text: enough engine for the runner's bookkeeping, fast for 200,000 chunks. */
class WordEngine implements Engine {
  async tokenize(request: TokenizeRequest): Promise<TokenizeResult> {
    const items = Array.isArray(request.items) ? request.items : [request.items];
    return {
      model: request.model,
      items: items.map((item, index) => {
        const length = (typeof item === 'string' ? item : item.text).split(/\s+/).filter((word) => word !== '').length;
        return { index, ids: [], tokens: [], truncated: false, length };
      }),
    };
  }

  async encode(request: EncodeRequest): Promise<EncodeResult> {
    const items = Array.isArray(request.items) ? request.items : [];
    return { model: request.model, items: items.map((_, index) => ({ index, dense: [1, 0, 0, 0] })), usage: { items: items.length, tokens: items.length } };
  }

  score(): never {
    throw new ShoalError(ErrorCode.UNSUPPORTED_OPERATION, 'not in this test');
  }

  extract(): never {
    throw new ShoalError(ErrorCode.UNSUPPORTED_OPERATION, 'not in this test');
  }

  async close(): Promise<void> {}
}

describe('IngestRunner with one very long document', () => {
  it('commits a document of 200,000 chunks (its rows were once spread into one push call, which overflowed the call stack)', async () => {
    // One sentence of six words per chunk of at most 8.
    const chunks = 200_000;
    const definition = parseDefinition({ name: 'long', stages: { chunk: { size: 8, overlap: 0 }, encode: { model: 'word-engine' } } }, 'test');
    const sink = new JsonlStore({ dir: join(dir, 'long') });
    const reader = {
      parse: async (source: { uri: string }) => ({
        ok: true as const,
        document: { source: source.uri, type: 'text' as const, contentHash: 'h', bytes: 1, pages: [{ page: 1, text: Array.from({ length: chunks }, (_, i) => `Sentence ${i} has exactly six words.`).join('\n\n'), ocr: false }] },
      }),
    };
    try {
      const runner = new IngestRunner({ definition, engine: new WordEngine(), sink, reader });
      const summary = await runner.run([{ uri: 'long-record', load: async () => ({ source: { uri: 'long-record', text: 'x' }, bytes: new Uint8Array([1]) }) }]);
      expect(summary).toMatchObject({ documents: { total: 1, ok: 1, failed: 0 }, pages: 1, chunks });
      expect((await sink.states(['long-record'])).get('long-record')).toMatchObject({ chunks, pages: 1 });
      expect(await sink.count()).toBe(chunks);
    } finally {
      await sink.close();
    }
  }, 120_000);
});

function labelEntries(value: unknown): { label: string; score: number }[] {
  if (!Array.isArray(value)) throw new Error('labels are not an array');
  return value.map((entry: unknown) => {
    if (typeof entry !== 'object' || entry === null || !('label' in entry) || !('score' in entry)) throw new Error('bad label entry');
    return { label: String(entry.label), score: Number(entry.score) };
  });
}
