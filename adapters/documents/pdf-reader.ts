import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import type { PDFDocumentProxy, PDFPageProxy } from 'pdfjs-dist';
import { ErrorCode, ShoalError } from '../protocol/errors.js';
import { isBlankRender } from './blank-page.js';
import { imageCoverage, type CoverageOps } from './image-coverage.js';
import { pageText, type PageText } from './page-text.js';
import { inkChars, largestTextFreeBand, type TextRun } from './text-lines.js';

/**
 * PDF reading with pdfjs-dist (legacy build, the one that runs in Node). Runs inside a parse
 * thread only: pdfjs parses content streams synchronously, which would stall any event loop
 * serving requests. Fonts are never turned into font faces and no code is evaluated, so a hostile
 * PDF gets no further than pdfjs's parser.
 */

type PdfJs = typeof import('pdfjs-dist');

let pdfjs: Promise<PdfJs> | null = null;

function loadPdfJs(): Promise<PdfJs> {
  pdfjs ??= import('pdfjs-dist/legacy/build/pdf.mjs') as Promise<PdfJs>;
  return pdfjs;
}

/** pdfjs's data folders: CMaps (CJK text), standard font metrics, wasm image decoders (JPEG 2000). */
function pdfjsAssets(): { cMapUrl: string; standardFontDataUrl: string; wasmUrl: string } {
  const root = dirname(createRequire(import.meta.url).resolve('pdfjs-dist/package.json'));
  return {
    cMapUrl: `${join(root, 'cmaps')}/`,
    standardFontDataUrl: `${join(root, 'standard_fonts')}/`,
    wasmUrl: `${join(root, 'wasm')}/`,
  };
}

function errorName(error: unknown): string {
  return error instanceof Error ? error.name : '';
}

/** A pdfjs failure as a document error: encrypted, or damaged in some way. */
export function pdfError(error: unknown, during: string): ShoalError {
  if (error instanceof ShoalError) return error;
  const message = error instanceof Error ? error.message : String(error);
  if (errorName(error) === 'PasswordException') {
    return new ShoalError(ErrorCode.DOCUMENT_ENCRYPTED, 'the PDF is password-protected (encrypted); Shoal does not read encrypted documents', { cause: error });
  }
  return new ShoalError(ErrorCode.DOCUMENT_CORRUPT, `the PDF is damaged or truncated (${during}: ${message})`, { cause: error });
}

export async function openPdf(data: Uint8Array): Promise<PDFDocumentProxy> {
  const { getDocument, VerbosityLevel } = await loadPdfJs();
  const task = getDocument({
    data,
    ...pdfjsAssets(),
    cMapPacked: true,
    disableFontFace: true,
    useSystemFonts: false,
    isEvalSupported: false,
    // Warnings about damaged but readable files would go to the thread's stdout.
    verbosity: VerbosityLevel.ERRORS,
  });
  try {
    return await task.promise;
  } catch (error) {
    await task.destroy().catch(() => undefined);
    throw pdfError(error, 'opening it');
  }
}

/** Pages with fewer characters than this in their text layer have "no text" (a stamp or page number at most). */
const MIN_TEXT_CHARS = 16;
/** Pages whose images cover at least this share of the page are read by OCR (scans, slides as images). */
const IMAGE_COVERAGE_FOR_OCR = 0.5;
/**
 * Image coverage is measured only on pages with a text-free horizontal band at least this tall
 * (share of the page height): an image covering half the page needs room, unless it lies under
 * the text, and then the text layer is the better reading. Measuring costs a second pass over the
 * page's content stream (about as long as extracting its text), so it is spent only where it can
 * change the outcome.
 */
const MIN_FREE_BAND_FOR_IMAGES = 0.35;

export type OcrMode = 'auto' | 'always' | 'never';
export type OcrReason = 'no-text' | 'images' | 'always';

export interface PdfPage extends PageText {
  /** Set when the page should be read by OCR (under `never`: when it would have been). */
  ocrReason: OcrReason | null;
  /** Share of the page covered by images (measured only where it decides something). */
  imageCoverage: number | null;
}

interface TextItemLike {
  str: string;
  width: number;
  height: number;
  transform: number[];
}

function isTextItem(item: unknown): item is TextItemLike {
  return typeof item === 'object' && item !== null && 'str' in item && 'transform' in item;
}

type Matrix6 = [number, number, number, number, number, number];

function compose(m: readonly number[], n: readonly number[]): Matrix6 {
  const [a = 1, b = 0, c = 0, d = 1, e = 0, f = 0] = m;
  const [g = 1, h = 0, i = 0, j = 1, k = 0, l = 0] = n;
  return [a * g + c * h, b * g + d * h, a * i + c * j, b * i + d * j, a * k + c * l + e, b * k + d * l + f];
}

/**
 * Text items of one page at most. A dense page has a few thousand; a content stream of nothing
 * but tiny text operators (within the stream limit of pdf-budget.ts) made tens of millions, each
 * an object, and the page's memory with them.
 */
export const MAX_PAGE_TEXT_ITEMS = 50_000;

/** The page's text items, read as pdfjs streams them, stopped past MAX_PAGE_TEXT_ITEMS (DOCUMENT_TOO_LARGE). */
async function textItems(page: PDFPageProxy): Promise<unknown[]> {
  const reader = page.streamTextContent().getReader();
  const items: unknown[] = [];
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return items;
    const chunk: unknown = typeof value === 'object' && value !== null && 'items' in value ? value.items : [];
    if (Array.isArray(chunk)) for (const item of chunk) items.push(item);
    if (items.length > MAX_PAGE_TEXT_ITEMS) {
      // Not awaited, and not enough: pdfjs's evaluator of this page never finishes, so the
      // document can no longer be destroyed; the caller stops this thread (parse.ts).
      reader.cancel().catch(() => undefined);
      throw new ShoalError(ErrorCode.DOCUMENT_TOO_LARGE, `page ${page.pageNumber} has over ${MAX_PAGE_TEXT_ITEMS} text items`, { details: { limit: 'maxPageTextItems', size: items.length, max: MAX_PAGE_TEXT_ITEMS } });
    }
  }
}

/** The page's text items as runs in top-down page coordinates (rotation applied). */
async function textRuns(page: PDFPageProxy): Promise<{ runs: TextRun[]; rotated: TextRun[]; pageHeight: number }> {
  const viewport = page.getViewport({ scale: 1 });
  const runs: TextRun[] = [];
  const rotated: TextRun[] = [];
  for (const item of await textItems(page)) {
    if (!isTextItem(item) || item.str.length === 0) continue;
    const m = compose(viewport.transform, item.transform);
    const size = Math.hypot(m[2], m[3]) || item.height;
    const horizontal = m[0] > 0 && Math.abs(m[1]) <= 0.01 * Math.abs(m[0]);
    const run: TextRun = { text: item.str, x: m[4], y: m[5], width: horizontal ? item.width : 0, size: size > 0 ? size : 1 };
    (horizontal ? runs : rotated).push(run);
  }
  return { runs, rotated, pageHeight: viewport.height };
}

let coverageOps: CoverageOps | null = null;

async function pageImageCoverage(page: PDFPageProxy): Promise<number> {
  const { OPS } = await loadPdfJs();
  coverageOps ??= {
    save: OPS.save,
    restore: OPS.restore,
    transform: OPS.transform,
    paintFormXObjectBegin: OPS.paintFormXObjectBegin,
    paintFormXObjectEnd: OPS.paintFormXObjectEnd,
    paintImageXObject: OPS.paintImageXObject,
    paintInlineImageXObject: OPS.paintInlineImageXObject,
    paintImageXObjectRepeat: OPS.paintImageXObjectRepeat,
  };
  const list = await page.getOperatorList();
  const [x0 = 0, y0 = 0, x1 = 0, y1 = 0] = page.view;
  return imageCoverage(list.fnArray, list.argsArray, Math.abs((x1 - x0) * (y1 - y0)), coverageOps);
}

const IMAGE_NAME = Buffer.from('/Image');
const SUBTYPE_BEFORE = /\/Subtype\s*$/;

/**
 * Whether the file has any image XObject. Their dictionaries are always in plain sight: a stream
 * object may not live inside a (compressed) object stream, so `/Subtype /Image` appears in the
 * file's bytes whenever the document holds an image. (`/ImageB`, `/ImageC`, `/ImageI` are procedure
 * set names, not images.) Inline images, inside content streams, are not seen; scans made of them
 * have no text layer and are routed by that.
 */
export function hasImageXObjects(bytes: Uint8Array): boolean {
  const buffer = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  for (let at = buffer.indexOf(IMAGE_NAME); at >= 0; at = buffer.indexOf(IMAGE_NAME, at + IMAGE_NAME.length)) {
    const after = buffer[at + IMAGE_NAME.length] ?? 0x20;
    const isName = (after >= 0x41 && after <= 0x5a) || (after >= 0x61 && after <= 0x7a) || (after >= 0x30 && after <= 0x39);
    if (!isName && SUBTYPE_BEFORE.test(buffer.toString('latin1', Math.max(0, at - 24), at))) return true;
  }
  return false;
}

export interface ReadPageOptions {
  mode: OcrMode;
  /** False when the document has no image XObjects: coverage is then 0 without measuring. */
  measureImages: boolean;
}

/** Reads page `number` (1-based): its text in reading order, headings, and whether it needs OCR. */
export async function readPdfPage(doc: PDFDocumentProxy, number: number, { mode, measureImages }: ReadPageOptions): Promise<PdfPage> {
  let page: PDFPageProxy;
  try {
    page = await doc.getPage(number);
  } catch (error) {
    throw pdfError(error, `reading page ${number}`);
  }
  try {
    const { runs, rotated, pageHeight } = await textRuns(page);
    const laidOut = pageText(runs);
    // Vertical or rotated text (margin notes, axis labels) follows the page's main text.
    const extra = pageText(rotated.map((run) => ({ ...run, width: 0 })));
    const text = [laidOut.text, extra.text].filter((part) => part.length > 0).join('\n\n');
    const chars = runs.reduce((sum, run) => sum + inkChars(run), 0) + rotated.reduce((sum, run) => sum + inkChars(run), 0);
    let ocrReason: OcrReason | null = null;
    let coverage: number | null = null;
    if (mode === 'always') ocrReason = 'always';
    else if (chars === 0) ocrReason = 'no-text';
    else if (mode === 'auto' && measureImages && (chars < MIN_TEXT_CHARS || largestTextFreeBand([...runs, ...rotated], pageHeight) >= MIN_FREE_BAND_FOR_IMAGES)) {
      coverage = await pageImageCoverage(page);
      if (chars < MIN_TEXT_CHARS && coverage > 0) ocrReason = 'no-text';
      else if (coverage >= IMAGE_COVERAGE_FOR_OCR) ocrReason = 'images';
    }
    return { text, headings: laidOut.headings, ocrReason, imageCoverage: coverage };
  } catch (error) {
    throw pdfError(error, `reading page ${number}`);
  } finally {
    page.cleanup();
  }
}

/** Largest rendered page, in pixels per side: a poster-sized page is rendered at a lower resolution. */
const MAX_RENDER_SIDE = 6000;

interface CanvasLike {
  toBuffer(mime: 'image/png'): Uint8Array;
}
interface CanvasContextLike {
  fillStyle: unknown;
  fillRect(x: number, y: number, width: number, height: number): void;
  getImageData(x: number, y: number, width: number, height: number): { data: ArrayLike<number> };
}
interface CanvasFactoryLike {
  create(width: number, height: number): { canvas: CanvasLike; context: CanvasContextLike };
  destroy(canvasAndContext: { canvas: CanvasLike; context: CanvasContextLike }): void;
}

function isCanvasFactory(value: unknown): value is CanvasFactoryLike {
  return typeof value === 'object' && value !== null && 'create' in value && typeof value.create === 'function' && 'destroy' in value;
}

/** Renders page `number` at `dpi` onto a white background and encodes it as PNG. */
export async function renderPdfPage(doc: PDFDocumentProxy, number: number, dpi: number): Promise<Uint8Array<ArrayBuffer>> {
  const png = await renderPage(doc, number, dpi, false);
  if (png === null) throw new ShoalError(ErrorCode.INTERNAL, 'a render kept for blank pages came back empty');
  return png;
}

/** As renderPdfPage, for OCR: null when the rendered page is blank (blank-page.ts), which OCR would read as nothing. */
export function renderPdfPageForOcr(doc: PDFDocumentProxy, number: number, dpi: number): Promise<Uint8Array<ArrayBuffer> | null> {
  return renderPage(doc, number, dpi, true);
}

async function renderPage(doc: PDFDocumentProxy, number: number, dpi: number, blankAsNull: boolean): Promise<Uint8Array<ArrayBuffer> | null> {
  const factory: unknown = doc.canvasFactory;
  if (!isCanvasFactory(factory)) throw new ShoalError(ErrorCode.INTERNAL, 'pdfjs has no canvas factory: is @napi-rs/canvas installed?');
  let page: PDFPageProxy;
  try {
    page = await doc.getPage(number);
  } catch (error) {
    throw pdfError(error, `reading page ${number}`);
  }
  try {
    const unscaled = page.getViewport({ scale: 1 });
    const scale = Math.min(dpi / 72, MAX_RENDER_SIDE / Math.max(unscaled.width, unscaled.height));
    const viewport = page.getViewport({ scale });
    const width = Math.max(1, Math.ceil(viewport.width));
    const height = Math.max(1, Math.ceil(viewport.height));
    const target = factory.create(width, height);
    try {
      target.context.fillStyle = '#ffffff';
      target.context.fillRect(0, 0, width, height);
      // pdfjs types name DOM canvas types, which Node lacks; these are @napi-rs/canvas objects.
      const params: Parameters<PDFPageProxy['render']>[0] = { canvas: null, canvasContext: target.context as never, viewport };
      await page.render(params).promise;
      if (blankAsNull && isBlankRender(target.context.getImageData(0, 0, width, height).data)) return null;
      return new Uint8Array(target.canvas.toBuffer('image/png'));
    } finally {
      factory.destroy(target);
    }
  } catch (error) {
    throw pdfError(error, `rendering page ${number}`);
  } finally {
    page.cleanup();
  }
}
