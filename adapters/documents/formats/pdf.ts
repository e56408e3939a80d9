import type { PDFDocumentProxy } from 'pdfjs-dist';
import { ErrorCode, ShoalError } from '../../protocol/errors.js';
import { checkPdfBudget } from '../pdf-budget.js';
import { hasImageXObjects, openPdf, readPdfPage, renderPdfPageForOcr } from '../pdf-reader.js';
import { defineFormat, tooLarge, type PagedDocument } from './format.js';
import { usableTitle } from './title.js';

/** PDF: `%PDF-` at the start or within the first KiB (the spec tolerates leading junk); read page by page. */

const PDF = [...'%PDF-'].map((char) => char.charCodeAt(0));
const HEADER_WINDOW = 1024;

function pdfHeaderAt(bytes: Uint8Array): number {
  const end = Math.min(bytes.length, HEADER_WINDOW) - PDF.length;
  outer: for (let i = 0; i <= end; i++) {
    for (let j = 0; j < PDF.length; j++) if (bytes[i + j] !== PDF[j]) continue outer;
    return i;
  }
  return -1;
}

async function pdfTitle(doc: PDFDocumentProxy): Promise<string | undefined> {
  try {
    const { info } = await doc.getMetadata();
    const title = typeof info === 'object' && info !== null && 'Title' in info ? info.Title : undefined;
    return typeof title === 'string' ? usableTitle(title) : undefined;
  } catch {
    // Metadata is optional: a damaged info dictionary must not fail a readable document.
    return undefined;
  }
}

function paged(doc: PDFDocumentProxy, measureImages: boolean): PagedDocument {
  return {
    async read(request) {
      const read = await readPdfPage(doc, request.page, { mode: request.ocr, measureImages });
      const body = { type: 'page' as const, page: request.page, text: read.text, headings: read.headings, ocrReason: read.ocrReason };
      if (read.ocrReason === null || request.ocr === 'never') return { body };
      const png = await renderPdfPageForOcr(doc, request.page, request.dpi);
      // A blank render goes back without an image: nothing for OCR to read.
      if (png === null) return { body: { ...body, blank: true } };
      return { body: { ...body, png }, transfer: [png.buffer] };
    },
    close: () => doc.destroy(),
  };
}

export const pdfFormat = defineFormat({
  type: 'pdf',
  sniff: { by: 'signature', match: ({ bytes }) => (pdfHeaderAt(bytes) >= 0 ? { type: 'pdf' } : null) },
  async open(bytes, { maxPages }) {
    // Bombs are refused before pdfjs inflates anything (pdf-budget.ts).
    await checkPdfBudget(bytes);
    // pdfjs takes ownership of (and detaches) the buffer it is given: hand it a copy.
    const doc = await openPdf(bytes.slice());
    if (doc.numPages === 0) {
      await doc.destroy();
      throw new ShoalError(ErrorCode.DOCUMENT_EMPTY, 'the PDF has no pages');
    }
    if (doc.numPages > maxPages) {
      await doc.destroy();
      throw tooLarge('maxPages', doc.numPages, maxPages, 'pages');
    }
    const title = await pdfTitle(doc);
    return {
      body: { kind: 'pdf', pageCount: doc.numPages, ...(title === undefined ? {} : { title }) },
      paged: paged(doc, hasImageXObjects(bytes)),
    };
  },
});
