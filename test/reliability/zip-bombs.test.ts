import { describe, expect, it } from 'vitest';
import { NO_ENGINE, peakGrowth } from '../helpers/bomb-harness.js';
import { ARCHIVE_LIMITS } from '../../adapters/documents/formats/zip-archive.js';
import { ErrorCode } from '../../adapters/protocol/errors.js';
import { DocumentParser } from '../../pipelines/documents/parse.js';
import { makeDocx, makeEpub, makePptx, makeXlsx } from '../helpers/document-samples.js';
import { zipBomb } from '../helpers/zip-bomb.js';

/**
 * ZIP decompression bombs in each ZIP document format: a member of about 1 MiB that inflates to
 * 1 GiB of zeros, in a DOCX (an image mammoth would never read), a PPTX slide, an XLSX sheet and
 * an EPUB chapter, two of them with headers that claim the member holds 1,000 bytes. Parsed at
 * once in two parse threads, each fails alone as DOCUMENT_TOO_LARGE, quickly and in bounded
 * memory: bytes are counted as they come out of the inflater, whatever the headers say.
 */


const GIB = 2 ** 30;

describe('ZIP decompression bombs', () => {
  it('a 1 GiB member in a DOCX, PPTX, XLSX and EPUB (two with lying headers), parsed at once, fails each alone as DOCUMENT_TOO_LARGE in bounded memory', async () => {
    const bombs = [
      { uri: 'bomb.docx', bytes: await zipBomb(await makeDocx({ heading: 'H', subheading: 'S', paragraphs: ['text'] }), 'word/media/image1.png', GIB) },
      { uri: 'bomb.pptx', bytes: await zipBomb(await makePptx([{ title: 'T', body: ['b'] }]), 'ppt/slides/slide1.xml', GIB, { lie: true }) },
      { uri: 'bomb.xlsx', bytes: await zipBomb(await makeXlsx([{ name: 'S', rows: [['a']] }]), 'xl/worksheets/sheet1.xml', GIB) },
      { uri: 'bomb.epub', bytes: await zipBomb(await makeEpub({ title: 'B', chapters: [{ file: 'a.xhtml', title: 'A', paragraphs: ['p'] }] }), 'OEBPS/text/a.xhtml', GIB, { lie: true }) },
    ];
    for (const bomb of bombs) expect(bomb.bytes.length).toBeLessThan(2 * 2 ** 20);
    const parser = new DocumentParser(NO_ENGINE, { ocr: 'never', threads: 2, stepTimeoutMs: 30_000 });
    try {
      // Threads started first, so their own start-up is not counted.
      await Promise.all([parser.parse({ uri: 'warm-1.txt', text: 'Warm up.' }), parser.parse({ uri: 'warm-2.txt', text: 'Warm up.' })]);
      const started = performance.now();
      const { result, megabytes } = await peakGrowth(() => Promise.all(bombs.map((bomb) => parser.parse(bomb))));
      const seconds = (performance.now() - started) / 1000;
      for (const outcome of result) {
        expect(outcome).toMatchObject({ ok: false, code: ErrorCode.DOCUMENT_TOO_LARGE, reason: expect.stringContaining(`over the limit of ${ARCHIVE_LIMITS.maxEntryBytes} bytes inflated from`) });
      }
      console.info(`4 ZIP bombs of 1 GiB each: DOCUMENT_TOO_LARGE in ${seconds.toFixed(1)} s, resident memory +${megabytes.toFixed(0)} MiB at the peak`);
      // Each thread stops at 64 MiB inflated; two at once stay far under one thread's 1 GiB budget.
      expect(megabytes).toBeLessThan(512);
      expect(seconds).toBeLessThan(30);
    } finally {
      await parser.close();
    }
  }, 120_000);
});
