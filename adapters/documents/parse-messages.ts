import type { DocumentType } from '../protocol/document-types.js';
import type { OcrMode, OcrReason } from './pdf-reader.js';
import type { Heading } from './text-reader.js';

/**
 * Messages between the main thread and a parse thread. A PDF is opened once and then read a page
 * per request, so the caller can hand rendered pages to OCR while the thread reads the next ones,
 * and report progress page by page. Other documents are read whole in their `open` request.
 */

export type DocumentBytes = { path: string } | { bytes: Uint8Array } | { text: string };

export type ParseRequest =
  | {
      type: 'open';
      /** The caller's handle for this document, unique per thread. */
      key: number;
      source: DocumentBytes;
      /** File name or URI: tells Markdown from text (by extension) and appears in messages. */
      name: string;
      maxBytes: number;
      maxPages: number;
    }
  | { type: 'page'; key: number; page: number; ocr: OcrMode; dpi: number }
  | { type: 'close'; key: number };

export interface WholePage {
  page: number;
  text: string;
  headings: Heading[];
}

export interface OpenedBase {
  type: 'opened';
  /** sha256 hex of the document's bytes. */
  contentHash: string;
  bytes: number;
  title?: string;
}

export type Opened =
  | (OpenedBase & { kind: 'pdf'; pageCount: number })
  | (OpenedBase & { kind: 'whole'; documentType: Exclude<DocumentType, 'pdf' | 'image'>; pages: WholePage[] })
  /** `image` is the file as given; a multi-page TIFF also has each further page as a PNG in `morePages`. */
  | (OpenedBase & { kind: 'image'; image: Uint8Array; morePages?: Uint8Array[] });

export interface PageRead {
  type: 'page';
  page: number;
  text: string;
  headings: Heading[];
  ocrReason: OcrReason | null;
  /** The page rendered as PNG, when it needs OCR and OCR is not turned off. */
  png?: Uint8Array;
  /** The page needed OCR but its render is blank (blank-page.ts): no PNG, OCR skipped. */
  blank?: boolean;
}

export type ParseResponse = Opened | PageRead | { type: 'closed' };
