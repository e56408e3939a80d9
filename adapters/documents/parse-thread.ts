import { createHash } from 'node:crypto';
import type { PDFDocumentProxy } from 'pdfjs-dist';
import { ErrorCode, ShoalError } from '../protocol/errors.js';
import { serveThread, type HandlerResult } from '../support/thread-rpc.js';
import { readRegularFile } from '../sources/checked-file.js';
import { readHtml } from './html-reader.js';
import type { DocumentBytes, Opened, ParseRequest, ParseResponse, PageRead } from './parse-messages.js';
import { checkPdfBudget } from './pdf-budget.js';
import { hasImageXObjects, openPdf, readPdfPage, renderPdfPageForOcr } from './pdf-reader.js';
import { sniffDocument } from './sniff.js';
import { decodeHtml, decodeText, markdownHeadings, requireText, stripFrontMatter } from './text-reader.js';

/**
 * Parse thread: reads files, sniffs their type, decodes text and HTML, and opens PDFs and reads
 * them page by page. Everything CPU-heavy about documents happens here, off the main thread.
 */

const openPdfs = new Map<number, { doc: PDFDocumentProxy; measureImages: boolean }>();

function tooLarge(what: string, size: number, limit: number, unit: string): ShoalError {
  return new ShoalError(ErrorCode.DOCUMENT_TOO_LARGE, `the document has ${size} ${unit}, over the limit of ${limit} ${unit} (${what})`, {
    details: { limit: what, size, max: limit },
  });
}

async function readBytes(source: DocumentBytes, maxBytes: number): Promise<Uint8Array> {
  if ('bytes' in source) return source.bytes;
  if ('text' in source) return new TextEncoder().encode(source.text);
  // Type and size checked on the opened file before reading, so an oversized file is never loaded into memory.
  return readRegularFile(source.path, { maxBytes, tooLarge: (size) => tooLarge('maxBytes', size, maxBytes, 'bytes') });
}

function firstHeading(headings: readonly { text: string }[]): string | undefined {
  return headings[0]?.text;
}

/**
 * A metadata title as people would write it: printer drivers store the application and file name
 * ("Microsoft Word - agenda.doc", "10811.exe"); those parts go, and what is left must have a letter.
 */
function usableTitle(raw: string): string | undefined {
  const title = raw
    .replace(/^\s*Microsoft (Word|PowerPoint|Excel) - /i, '')
    .replace(/\.(docx?|xlsx?|pptx?|rtf|txt|exe|pdf|indd|qxd|tmp|tex|dvi)\s*$/i, '')
    .trim();
  return /\p{L}/u.test(title) ? title : undefined;
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

/**
 * The pages after the first of a multi-page TIFF, each as a PNG the OCR model reads (it decodes the
 * first page of a file only); none for a single page. Over `maxPages` the document is too large.
 */
async function tiffPages(bytes: Uint8Array, maxPages: number): Promise<Uint8Array[]> {
  const { default: sharp } = await import('sharp');
  let pages: number;
  try {
    pages = (await sharp(bytes).metadata()).pages ?? 1;
  } catch (error) {
    throw new ShoalError(ErrorCode.DOCUMENT_CORRUPT, `the TIFF image cannot be read: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
  }
  if (pages > maxPages) throw tooLarge('maxPages', pages, maxPages, 'pages');
  const out: Uint8Array[] = [];
  for (let page = 1; page < pages; page++) {
    try {
      out.push(new Uint8Array(await sharp(bytes, { page }).png().toBuffer()));
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      // sharp's pixel limit guards memory: a page over it is too large, not damaged.
      const code = /pixel limit/i.test(message) ? ErrorCode.DOCUMENT_TOO_LARGE : ErrorCode.DOCUMENT_CORRUPT;
      throw new ShoalError(code, `page ${page + 1} of the TIFF image cannot be read: ${message}`, { cause: error });
    }
  }
  return out;
}

async function open(request: Extract<ParseRequest, { type: 'open' }>): Promise<HandlerResult<Opened>> {
  const bytes = await readBytes(request.source, request.maxBytes);
  if (bytes.length > request.maxBytes) throw tooLarge('maxBytes', bytes.length, request.maxBytes, 'bytes');
  const contentHash = createHash('sha256').update(bytes).digest('hex');
  const base = { type: 'opened' as const, contentHash, bytes: bytes.length };
  const sniffed = 'text' in request.source ? { type: 'text' as const } : sniffDocument(bytes, request.name);
  switch (sniffed.type) {
    case 'pdf': {
      // Bombs are refused before pdfjs inflates anything (pdf-budget.ts).
      await checkPdfBudget(bytes);
      // pdfjs takes ownership of (and detaches) the buffer it is given: hand it a copy.
      const doc = await openPdf(bytes.slice());
      if (doc.numPages === 0) {
        await doc.destroy();
        throw new ShoalError(ErrorCode.DOCUMENT_EMPTY, 'the PDF has no pages');
      }
      if (doc.numPages > request.maxPages) {
        await doc.destroy();
        throw tooLarge('maxPages', doc.numPages, request.maxPages, 'pages');
      }
      openPdfs.set(request.key, { doc, measureImages: hasImageXObjects(bytes) });
      const title = await pdfTitle(doc);
      return { body: { ...base, kind: 'pdf', pageCount: doc.numPages, ...(title === undefined ? {} : { title }) } };
    }
    case 'image': {
      const image = bytes.slice();
      // A multi-page TIFF (a scanned fax or contract): every page is read, not the first alone.
      const morePages = sniffed.imageFormat === 'tiff' ? await tiffPages(bytes, request.maxPages) : [];
      if (morePages.length === 0) return { body: { ...base, kind: 'image', image }, transfer: [image.buffer] };
      return { body: { ...base, kind: 'image', image, morePages }, transfer: [image.buffer, ...morePages.map((page) => page.buffer as ArrayBuffer)] };
    }
    case 'html': {
      const html = readHtml(decodeHtml(bytes));
      const page = { page: 1, text: html.text, headings: html.headings };
      return { body: { ...base, kind: 'whole', documentType: 'html', pages: [page], ...(html.title === undefined ? {} : { title: html.title }) } };
    }
    case 'markdown':
    case 'text': {
      const decoded = decodeText(bytes);
      const front = sniffed.type === 'markdown' ? stripFrontMatter(decoded) : { text: decoded };
      const text = requireText(front.text, sniffed.type === 'markdown' ? 'Markdown file' : 'text file');
      const headings = sniffed.type === 'markdown' ? markdownHeadings(text) : [];
      const title = front.title ?? firstHeading(headings);
      const page = { page: 1, text, headings };
      return { body: { ...base, kind: 'whole', documentType: sniffed.type, pages: [page], ...(title === undefined ? {} : { title }) } };
    }
  }
}

async function page(request: Extract<ParseRequest, { type: 'page' }>): Promise<HandlerResult<PageRead>> {
  const open = openPdfs.get(request.key);
  if (open === undefined) throw new ShoalError(ErrorCode.INTERNAL, `no open PDF for key ${request.key}`);
  const { doc, measureImages } = open;
  const read = await readPdfPage(doc, request.page, { mode: request.ocr, measureImages });
  const body: PageRead = { type: 'page', page: request.page, text: read.text, headings: read.headings, ocrReason: read.ocrReason };
  if (read.ocrReason === null || request.ocr === 'never') return { body };
  const png = await renderPdfPageForOcr(doc, request.page, request.dpi);
  // A blank render goes back without an image: nothing for OCR to read.
  if (png === null) return { body: { ...body, blank: true } };
  return { body: { ...body, png }, transfer: [png.buffer] };
}

async function close(key: number): Promise<HandlerResult<ParseResponse>> {
  const open = openPdfs.get(key);
  openPdfs.delete(key);
  if (open !== undefined) await open.doc.destroy();
  return { body: { type: 'closed' } };
}

async function handle(request: ParseRequest): Promise<HandlerResult<ParseResponse>> {
  switch (request.type) {
    case 'open':
      return open(request);
    case 'page':
      return page(request);
    case 'close':
      return close(request.key);
  }
}

serveThread<ParseRequest, ParseResponse>(handle);
