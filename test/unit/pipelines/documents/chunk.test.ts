import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { Engine } from '../../../../adapters/protocol/engine.js';
import type { TokenizeRequest } from '../../../../adapters/protocol/requests.js';
import { markdownHeadings } from '../../../../adapters/documents/text-reader.js';
import { chunkPages, encoderTokenLimit, engineTokenCounter, type TokenCounter } from '../../../../pipelines/documents/chunk.js';
import type { ParsedPage } from '../../../../pipelines/documents/document.js';
import { InferenceEngine } from '../../../../pipelines/inference/engine.js';
import { CONFORMANCE_DIR } from '../../../helpers/shared.js';

/** Chunking with the real MiniLM tokenizer (bench-minilm-l6: real vocabulary, random weights). */

const MODEL = join(CONFORMANCE_DIR, 'bench-minilm-l6');
const engine = new InferenceEngine({ runtime: { intraOpThreads: 1 } });
afterAll(() => engine.close());

/** The engine, counting tokenize calls. */
function countingEngine(): { engine: Engine; calls: () => number } {
  let calls = 0;
  const wrapped: Engine = {
    encode: (r, o) => engine.encode(r, o),
    score: (r, o) => engine.score(r, o),
    extract: (r, o) => engine.extract(r, o),
    tokenize: (request: TokenizeRequest, o) => {
      calls += 1;
      return engine.tokenize(request, o);
    },
    close: async () => undefined,
  };
  return { engine: wrapped, calls: () => calls };
}

async function tokenCount(text: string): Promise<number> {
  const result = await engine.tokenize({ model: MODEL, items: [{ text, role: 'document' }] });
  return (result.items[0]?.length ?? 0) - 2;
}

const SENTENCES = Array.from({ length: 40 }, (_, i) => `Sentence number ${i} talks about topic ${String.fromCharCode(97 + (i % 26))} in some detail.`);
const PAGE_ONE: ParsedPage = {
  page: 1,
  ocr: false,
  text: `Introduction\n\n${SENTENCES.slice(0, 20).join(' ')}\n\nMethods\n\n${SENTENCES.slice(20).join(' ')}`,
  headings: [
    { offset: 0, text: 'Introduction' },
    { offset: `Introduction\n\n${SENTENCES.slice(0, 20).join(' ')}\n\n`.length, text: 'Methods' },
  ],
};
const PAGE_TWO: ParsedPage = { page: 2, ocr: false, text: 'A short second page. It has two sentences.' };

describe('chunkPages', () => {
  it('cuts at sentence boundaries within the token size, with offsets, pages and headings', async () => {
    const counting = countingEngine();
    const chunks = await chunkPages([PAGE_ONE, PAGE_TWO], { size: 48, overlap: 12 }, engineTokenCounter(counting.engine, MODEL));
    // One call for the special-token probe, one for all sentences of both pages: nothing per chunk.
    expect(counting.calls()).toBe(2);
    expect(chunks.length).toBeGreaterThan(6);
    expect(chunks.map((chunk) => chunk.index)).toEqual(chunks.map((_, i) => i));
    for (const chunk of chunks) {
      const page = chunk.page === 1 ? PAGE_ONE : PAGE_TWO;
      expect(chunk.text).toBe(page.text.slice(chunk.start, chunk.end));
      // Measured again by the real tokenizer on the chunk's own text.
      expect(await tokenCount(chunk.text)).toBeLessThanOrEqual(48);
      expect(chunk.text.endsWith('.') || chunk.text === 'Introduction' || chunk.text === 'Methods' || chunk.text.endsWith('Methods')).toBe(true);
    }
    const methodsAt = PAGE_ONE.headings?.[1]?.offset ?? 0;
    for (const chunk of chunks.filter((c) => c.page === 1)) expect(chunk.heading).toBe(chunk.start >= methodsAt ? 'Methods' : 'Introduction');
    // The heading carries over to page 2, which has none of its own.
    expect(chunks.at(-1)).toMatchObject({ page: 2, text: PAGE_TWO.text, heading: 'Methods' });
    // Overlap: consecutive chunks of page 1 share whole sentences.
    const pageOne = chunks.filter((c) => c.page === 1);
    const overlapping = pageOne.slice(1).filter((chunk, i) => chunk.start < (pageOne[i]?.end ?? 0));
    expect(overlapping.length).toBeGreaterThan(pageOne.length / 2);
    // Every sentence is in some chunk.
    for (const sentence of SENTENCES) expect(chunks.some((chunk) => chunk.text.includes(sentence))).toBe(true);
  });

  it('splits a sentence longer than a chunk into runs of whole words', async () => {
    const long = Array.from({ length: 120 }, (_, i) => `word${i}`).join(' ');
    const page: ParsedPage = { page: 1, ocr: false, text: long };
    const chunks = await chunkPages([page], { size: 40, overlap: 0 }, engineTokenCounter(engine, MODEL));
    expect(chunks.length).toBeGreaterThan(2);
    for (const chunk of chunks) {
      expect(await tokenCount(chunk.text)).toBeLessThanOrEqual(40);
      expect(/^word\d+$/.test(chunk.text.split(' ')[0] ?? '')).toBe(true);
    }
    expect(chunks.map((c) => c.text).join(' ')).toBe(long);
  });

  it('cuts a word longer than a chunk (base64, a URL) and CJK text without spaces into pieces within the size', async () => {
    const base64 = Buffer.from(Array.from({ length: 1500 }, (_, i) => (i * 37) % 256)).toString('base64');
    const chinese = '港口的引航船在黎明时出发，并在潮水转向之前返回。'.repeat(12);
    const page: ParsedPage = { page: 1, ocr: false, text: `Data: ${base64}\n\n${chinese}` };
    const chunks = await chunkPages([page], { size: 40, overlap: 0 }, engineTokenCounter(engine, MODEL));
    expect(chunks.length).toBeGreaterThan(10);
    for (const chunk of chunks) {
      expect(chunk.text).toBe(page.text.slice(chunk.start, chunk.end));
      expect(await tokenCount(chunk.text)).toBeLessThanOrEqual(40);
    }
    // Nothing is lost: the chunks cover the text, whitespace aside.
    expect(chunks.map((chunk) => chunk.text).join('').replace(/\s+/g, '')).toBe(page.text.replace(/\s+/g, ''));
    // The Chinese sentences end at 。 without a space after it.
    expect(chunks.filter((chunk) => chunk.text.startsWith('港口')).length).toBeGreaterThan(1);
  });

  it('never makes a chunk of nothing but the previous chunk’s overlap', async () => {
    // Words as tokens: units of 3, 9 and 12 tokens; size 20, overlap 10. The second unit fits the
    // overlap, but with it the third does not fit, so the overlap must give way.
    const words: TokenCounter = async (texts) => texts.map((text) => text.split(/\s+/).filter((word) => word !== '').length);
    const text = 'a b c. d e f g h i j k l. m n o p q r s t u v w x.';
    const chunks = await chunkPages([{ page: 1, ocr: false, text }], { size: 20, overlap: 10 }, words);
    expect(chunks.map((chunk) => chunk.text)).toEqual(['a b c. d e f g h i j k l.', 'm n o p q r s t u v w x.']);
    for (const [i, chunk] of chunks.entries()) if (i > 0) expect(chunk.end).toBeGreaterThan(chunks[i - 1]?.end ?? 0);
  });

  it('a chunk that opens with a Markdown heading falls under that heading', async () => {
    const words: TokenCounter = async (texts) => texts.map((text) => text.split(/\s+/).filter((word) => word !== '').length);
    const text = '# Guide\n\nOne two three four five six.\n\n## Daily checks\n\nSeven eight nine ten eleven twelve.';
    const page: ParsedPage = { page: 1, ocr: false, text, headings: markdownHeadings(text) };
    const chunks = await chunkPages([page], { size: 9, overlap: 0 }, words);
    expect(chunks.map((chunk) => [chunk.text.split('\n')[0], chunk.heading])).toEqual([
      ['# Guide', 'Guide'],
      ['## Daily checks', 'Daily checks'],
    ]);
  });

  it("finds the encoder's token limit (max_seq_length 256 minus [CLS] and [SEP])", async () => {
    expect(await encoderTokenLimit(engine, MODEL)).toBe(254);
  });

  it('returns no chunk for a page without text', async () => {
    const chunks = await chunkPages([{ page: 1, ocr: true, text: '  \n\n ' }], { size: 40, overlap: 8 }, engineTokenCounter(engine, MODEL));
    expect(chunks).toEqual([]);
  });
});
