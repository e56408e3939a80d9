import { describe, expect, it } from 'vitest';
import { NO_ENGINE, peakGrowth } from '../helpers/bomb-harness.js';
import { checkPdfBudget, PDF_LIMITS } from '../../adapters/documents/pdf-budget.js';
import { MAX_PAGE_TEXT_ITEMS } from '../../adapters/documents/pdf-reader.js';
import { ErrorCode } from '../../adapters/protocol/errors.js';
import { DocumentParser } from '../../pipelines/documents/parse.js';
import { contentBomb, imageBomb, textItemsPdf } from '../helpers/pdf-bomb.js';

/**
 * Issue 42, item 5: PDF decompression bombs. A 1 MB PDF whose content stream inflated to 1 GiB
 * took a parse thread to 2.64 GB; a 389 KB PDF painting a 20000² image reached 4.71 GB before the
 * 60 s watchdog. Both are now refused at open (DOCUMENT_TOO_LARGE, pdf-budget.ts) with the memory
 * of two of them parsed at once a small fraction of a parse thread's 1 GiB budget.
 */


describe('PDF decompression bombs', () => {
  it('a 1 GiB content stream and a 20000² image, parsed at once, fail alone as DOCUMENT_TOO_LARGE in bounded memory', async () => {
    const content = contentBomb(2 ** 30);
    const image = imageBomb(20_000);
    expect(content.length).toBeLessThan(8 * 2 ** 20);
    expect(image.length).toBeLessThan(3 * 2 ** 20);
    const parser = new DocumentParser(NO_ENGINE, { ocr: 'auto', threads: 2, stepTimeoutMs: 20_000 });
    try {
      // Threads started first, so their own start-up is not counted.
      await parser.parse({ uri: 'warm.txt', text: 'Warm the threads up.' });
      const started = performance.now();
      const { result, megabytes } = await peakGrowth(() => Promise.all([parser.parse({ uri: 'content.pdf', bytes: content }), parser.parse({ uri: 'image.pdf', bytes: image })]));
      const [contentOutcome, imageOutcome] = result;
      expect(contentOutcome).toMatchObject({ ok: false, code: ErrorCode.DOCUMENT_TOO_LARGE, reason: expect.stringContaining(`over ${PDF_LIMITS.maxStreamBytes} bytes`) });
      expect(imageOutcome).toMatchObject({ ok: false, code: ErrorCode.DOCUMENT_TOO_LARGE, reason: expect.stringContaining('20000×20000 pixels') });
      // Both at once: far under one parse thread's 1 GiB budget (before: 2.64 GB and 4.71 GB).
      expect(megabytes).toBeLessThan(256);
      expect(performance.now() - started).toBeLessThan(15_000);
    } finally {
      await parser.close();
    }
  }, 60_000);

  it('a page of more text items than the limit fails as DOCUMENT_TOO_LARGE; a page under it is read', async () => {
    const parser = new DocumentParser(NO_ENGINE, { ocr: 'never', threads: 1 });
    try {
      const over = await parser.parse({ uri: 'items.pdf', bytes: textItemsPdf(MAX_PAGE_TEXT_ITEMS + 1_000) });
      expect(over).toMatchObject({ ok: false, code: ErrorCode.DOCUMENT_TOO_LARGE, reason: expect.stringContaining(`over ${MAX_PAGE_TEXT_ITEMS} text items`) });
      const under = await parser.parse({ uri: 'few.pdf', bytes: textItemsPdf(50) });
      expect(under.ok && under.document.pages[0]?.text.split('\n').length).toBe(50);
    } finally {
      await parser.close();
    }
  }, 60_000);

  it('the limits are per stream, per image and per document', async () => {
    const limits = { maxStreamBytes: 1_000_000, maxDocumentStreamBytes: 1_500_000, maxImagePixels: 250_000, maxDocumentImagePixels: 1_000_000 };
    await expect(checkPdfBudget(contentBomb(999_000), limits)).resolves.toBeUndefined();
    await expect(checkPdfBudget(contentBomb(1_000_001), limits)).rejects.toMatchObject({ code: ErrorCode.DOCUMENT_TOO_LARGE, details: { limit: 'maxStreamBytes' } });
    await expect(checkPdfBudget(imageBomb(500), limits)).resolves.toBeUndefined();
    await expect(checkPdfBudget(imageBomb(501), limits)).rejects.toMatchObject({ code: ErrorCode.DOCUMENT_TOO_LARGE, details: { limit: 'maxImagePixels' } });
    // 500² pixels inflate to 250,000 bytes each: under the stream limit, and six of them over the document's.
    await expect(checkPdfBudget(imageBomb(500), { ...limits, maxDocumentStreamBytes: 200_000 })).rejects.toMatchObject({ details: { limit: 'maxDocumentStreamBytes' } });
    await expect(checkPdfBudget(imageBomb(500), { ...limits, maxDocumentImagePixels: 200_000 })).rejects.toMatchObject({ details: { limit: 'maxDocumentImagePixels' } });
  });
});
