import { describe, expect, it } from 'vitest';
import { writePdf, type PageSpec } from '../../adapters/documents/pdf-writer.js';
import type { Engine } from '../../adapters/protocol/engine.js';
import { ErrorCode, ShoalError } from '../../adapters/protocol/errors.js';
import type { ExtractRequest } from '../../adapters/protocol/requests.js';
import type { ExtractResult } from '../../adapters/protocol/results.js';
import { DocumentParser } from '../../pipelines/documents/parse.js';

/**
 * Issue 42, item 14 (first part): every blank page of a PDF was rendered and read by OCR, 0.79
 * CPU-s each for nothing. A blank render (grey values within 16 levels) now skips OCR; a page
 * with any mark is still read.
 */

/** Counts OCR calls; answers "seen" for every page it is given. */
class CountingOcr implements Engine {
  calls = 0;

  async extract(request: ExtractRequest): Promise<ExtractResult> {
    this.calls += 1;
    const items = Array.isArray(request.items) ? request.items : [];
    return { model: request.model, items: items.map((_, index) => ({ index, entities: [], text: 'seen' })), usage: { items: items.length, tokens: 0 } };
  }

  encode(): never {
    throw new ShoalError(ErrorCode.UNSUPPORTED_OPERATION, 'not in this test');
  }

  score(): never {
    throw new ShoalError(ErrorCode.UNSUPPORTED_OPERATION, 'not in this test');
  }

  tokenize(): never {
    throw new ShoalError(ErrorCode.UNSUPPORTED_OPERATION, 'not in this test');
  }

  async close(): Promise<void> {}
}

/** A 200×200 grey page image: white, or white with a black square (a mark OCR must look at). */
function image(marked: boolean): PageSpec {
  const pixels = new Uint8Array(200 * 200).fill(255);
  if (marked) for (let y = 80; y < 120; y += 1) pixels.fill(0, y * 200 + 80, y * 200 + 120);
  return { width: 300, height: 300, image: { width: 200, height: 200, pixels } };
}

describe('blank pages', () => {
  it('are not sent to OCR; a page with a mark still is', async () => {
    const blank: PageSpec = { width: 300, height: 300, lines: [] };
    const bytes = writePdf([blank, image(false), image(true), blank, { width: 300, height: 300, image: { width: 10, height: 10, pixels: new Uint8Array(100).fill(250) } }]);
    const engine = new CountingOcr();
    const parser = new DocumentParser(engine, { ocr: 'auto', threads: 1 });
    try {
      const outcome = await parser.parse({ uri: 'blank.pdf', bytes });
      if (!outcome.ok) throw new Error(`${outcome.code}: ${outcome.reason}`);
      // Five pages need OCR (no text layer); only the marked one is read.
      expect(engine.calls).toBe(1);
      expect(outcome.document.pages.map((page) => [page.text, page.ocr])).toEqual([
        ['', false],
        ['', false],
        ['seen', true],
        ['', false],
        ['', false],
      ]);
      expect(outcome.document.pages.every((page) => page.ocrReason === 'no-text')).toBe(true);
    } finally {
      await parser.close();
    }
  }, 30_000);
});
