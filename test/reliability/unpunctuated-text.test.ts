import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { CallOptions, Engine } from '../../adapters/protocol/engine.js';
import { ErrorCode, ShoalError } from '../../adapters/protocol/errors.js';
import type { EncodeRequest, TokenizeRequest } from '../../adapters/protocol/requests.js';
import type { EncodeResult, TokenizeResult } from '../../adapters/protocol/results.js';
import { JsonlStore } from '../../adapters/stores/file/store.js';
import { MAX_CHUNK_CHARS } from '../../pipelines/documents/chunk.js';
import { parseDefinition } from '../../pipelines/documents/definition.js';
import { DocumentParser } from '../../pipelines/documents/parse.js';
import { IngestRunner } from '../../pipelines/documents/runner.js';
import { fileSources } from '../../pipelines/documents/sources.js';
import { InferenceEngine } from '../../pipelines/inference/engine.js';
import { CONFORMANCE_DIR } from '../helpers/shared.js';

/**
 * Issue 42, item 4: a run of text with no sentence end over 1,000,000 characters (the limit of one
 * tokenize item) failed the whole ingest with `invalid tokenize request: text longer than 1000000
 * characters`, and no other file was indexed (CLI, `--nats` and HTTP share this runner). Now the
 * chunker cuts any text into bounded pieces before tokenizing, every tokenize request fits a NATS
 * message, and a document whose text is still refused fails alone, with its code in the summary.
 *
 * Tokens are counted by the real engine and MiniLM tokenizer (whose request schema refused the
 * long item); vectors are fixed, so the test times the chunker, not a model.
 */

const MODEL = join(CONFORMANCE_DIR, 'bench-minilm-l6');
const dir = await mkdtemp(join(tmpdir(), 'shoal-unpunctuated-'));
const real = new InferenceEngine({ runtime: { intraOpThreads: 1 } });
afterAll(async () => {
  await real.close();
  await rm(dir, { recursive: true, force: true });
});

/** The real engine's tokenize, recorded, with fixed 4-dimensional vectors for encode. */
class TokenizingEngine implements Engine {
  /** Characters of each tokenize request. */
  readonly requestChars: number[] = [];
  /** Tokenize requests holding this text fail as a hostile worker's would. */
  refuse: string | null = null;

  async tokenize(request: TokenizeRequest, options?: CallOptions): Promise<TokenizeResult> {
    const items = Array.isArray(request.items) ? request.items : [request.items];
    const texts = items.map((item) => (typeof item === 'string' ? item : item.text));
    this.requestChars.push(texts.reduce((sum, text) => sum + text.length, 0));
    if (this.refuse !== null && texts.some((text) => text.includes(this.refuse ?? ''))) throw new ShoalError(ErrorCode.INVALID_INPUT, 'invalid tokenize request: refused for this test');
    return real.tokenize(request, options);
  }

  async encode(request: EncodeRequest): Promise<EncodeResult> {
    const items = Array.isArray(request.items) ? request.items : [];
    for (const item of items) if ((typeof item === 'string' ? item : 'text' in item ? item.text : '').length > MAX_CHUNK_CHARS) throw new ShoalError(ErrorCode.INVALID_INPUT, 'a chunk over MAX_CHUNK_CHARS');
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

/** Words without a sentence end, `chars` long. */
const unpunctuated = (chars: number): string => {
  const words = ['harbour', 'pilot', 'tide', 'vessel', 'anchor', 'channel', 'buoy', 'draught'];
  const out: string[] = [];
  let length = 0;
  for (let i = 0; length < chars; i += 1) {
    const word = `${words[i % words.length] ?? ''}${i % 97}`;
    out.push(word);
    length += word.length + 1;
  }
  return out.join(' ');
};

await writeFile(join(dir, 'log-line.txt'), unpunctuated(1_050_000));
// Not one whitespace: a base64 blob of 1.05 M characters.
await writeFile(join(dir, 'blob.txt'), Buffer.from(Array.from({ length: 788_000 }, (_, i) => (i * 131 + (i >> 7)) % 256)).toString('base64'));
await writeFile(join(dir, 'normal.txt'), 'The pilot boards at dawn. The tide turns at noon.');
const small = join(dir, 'small');
await mkdir(small);
await writeFile(join(small, 'one.txt'), 'The pilot boards at dawn. The tide turns at noon.');
await writeFile(join(small, 'two.txt'), 'Buoys mark the channel. Vessels keep to starboard.');
await writeFile(join(small, 'three.txt'), 'The anchor holds in sand. The draught is nine metres.');

describe('a text with no sentence end over 1,000,000 characters', () => {
  it('is cut into bounded pieces: every document is indexed, each tokenize request fits a NATS message', async () => {
    const engine = new TokenizingEngine();
    const sink = new JsonlStore({ dir: join(dir, 'index') });
    const parser = new DocumentParser(engine, { ocr: 'never' });
    try {
      const definition = parseDefinition({ name: 'long-runs', stages: { chunk: { size: 254, overlap: 0 }, encode: { model: MODEL } } }, 'test');
      const runner = new IngestRunner({ definition, engine, sink, reader: parser });
      const summary = await runner.run(await fileSources([dir], { include: ['*.txt'] }));
      expect(summary.failed).toEqual([]);
      expect(summary.documents).toMatchObject({ total: 3, ok: 3, failed: 0 });
      // 1.05 M characters of ~9-character words at 254 tokens a chunk, and the blob: thousands of chunks.
      expect(summary.chunks).toBeGreaterThan(2_000);
      // Each request is at most 80,000 characters (the encoder-limit probe; text batches at most
      // 65,536): about 100 KB of JSON, far under NATS's 1 MiB.
      expect(Math.max(...engine.requestChars)).toBeLessThanOrEqual(80_000);
      const states = await sink.states([join(dir, 'log-line.txt'), join(dir, 'blob.txt'), join(dir, 'normal.txt')]);
      expect([...states.values()].map((state) => state.chunks).every((chunks) => chunks > 0)).toBe(true);
    } finally {
      await parser.close();
      await sink.close();
    }
  }, 120_000);

  it('a document whose text is still refused fails alone, with its code; the others are indexed', async () => {
    const engine = new TokenizingEngine();
    engine.refuse = 'tide turns';
    const sink = new JsonlStore({ dir: join(dir, 'refused') });
    const parser = new DocumentParser(engine, { ocr: 'never' });
    try {
      const definition = parseDefinition({ name: 'refused', stages: { encode: { model: MODEL } } }, 'test');
      const runner = new IngestRunner({ definition, engine, sink, reader: parser });
      const summary = await runner.run(await fileSources([small], { include: ['*.txt'] }));
      expect(summary.documents).toMatchObject({ total: 3, ok: 2, failed: 1 });
      expect(summary.failed).toEqual([{ source: join(small, 'one.txt'), code: ErrorCode.INVALID_INPUT, reason: expect.stringContaining('cannot be chunked') }]);
      expect([...(await sink.states(['one', 'two', 'three'].map((name) => join(small, `${name}.txt`)))).keys()].sort()).toEqual([join(small, 'three.txt'), join(small, 'two.txt')]);
    } finally {
      await parser.close();
      await sink.close();
    }
  }, 60_000);
});
