import { z } from 'zod';
import type { DocumentType } from '../../adapters/protocol/document-types.js';
import { ErrorCode, ShoalError } from '../../adapters/protocol/errors.js';
import { MAX_DOCUMENT_BYTES } from '../../adapters/protocol/limits.js';
import type { DocumentMetadata } from '../../adapters/protocol/metadata.js';

/**
 * What the parse stage reads and what it hands to the rest of a document pipeline. A document is
 * identified downstream by `contentHash` (sha256 of its bytes), so the same bytes under another
 * name or path are the same document.
 */

/** The document types (adapters/protocol/document-types.ts, the one list). */
export type { DocumentType };

/** A file (by path, or its bytes already read) or an inline text record (JSON Lines `{"id","text"}`). */
export interface DocumentSource {
  /** Where the document came from, as shown to users and stored with each chunk. */
  uri: string;
  path?: string;
  bytes?: Uint8Array;
  text?: string;
  id?: string;
  /** Metadata the source came with (a record's `metadata`, a document job's), stored over the automatic file fields (document-metadata.ts). */
  metadata?: DocumentMetadata;
  /** A local file's modification time (ISO 8601), stored as the `mtime` metadata field. */
  modified?: string;
}

export interface ParsedPage {
  /** 1-based page number: a PDF page, TIFF page, slide (PPTX), sheet (XLSX) or spine item (EPUB); always 1 for text, Markdown, HTML, DOCX, email and other images. */
  page: number;
  /** Text in reading order: lines joined by '\n', paragraphs separated by a blank line. */
  text: string;
  /** True when the text came from OCR of the rendered page rather than its text layer. */
  ocr: boolean;
  /** Headings on this page, `offset` being the character offset of the heading in `text`. */
  headings?: { offset: number; text: string }[];
  /** Why the page was (or, under `ocr: never`, would have been) sent to OCR. */
  ocrReason?: OcrReason;
}

/** `no-text`: no usable text layer; `images`: images cover most of the page; `always`: forced. */
export type OcrReason = 'no-text' | 'images' | 'always' | 'image-file';

export interface ParsedDocument {
  source: string;
  type: DocumentType;
  /** sha256 hex of the document's bytes (UTF-8 bytes of inline text). */
  contentHash: string;
  pages: ParsedPage[];
  title?: string;
  /** Size of the document in bytes. */
  bytes: number;
  /** The record id of an inline JSON Lines source, when it had one. */
  id?: string;
}

export type ParseOutcome =
  | { ok: true; document: ParsedDocument }
  | { ok: false; source: string; code: string; reason: string };

export interface ParseOptions {
  /** @default 'auto': OCR pages without a usable text layer or mostly covered by images. */
  ocr: 'auto' | 'always' | 'never';
  /** @default 'paddleocr/pp-ocrv4' */
  ocrModel: string;
  /** Resolution pages are rendered at for OCR. @default 150 */
  ocrDpi: number;
  /** PDF page numbers, running heads and feet: left out of the text (`drop`) or kept. @default 'drop' */
  furniture: 'drop' | 'keep';
  /** A larger document fails with DOCUMENT_TOO_LARGE. @default 100 MiB */
  maxBytes: number;
  /** A PDF or TIFF with more pages, a PPTX with more slides, an XLSX with more sheets or an EPUB with more spine items fails with DOCUMENT_TOO_LARGE. @default 5000 */
  maxPages: number;
  signal?: AbortSignal;
  /** Called once per page as soon as the page is read (progress bars). */
  onPage?: (info: { source: string; page: number; ocr: boolean }) => void;
  /** Parse threads (PDF, HTML and text decoding run there). @default min(2, available cores) */
  threads?: number;
  /** Heap limit of each parse thread in MiB; a document that needs more fails alone. @default 1024 */
  threadMemoryMb?: number;
  /**
   * Longest a parse thread may spend on one step (opening a document, reading or rendering one
   * page); past it the thread is stopped and the document fails with TIMEOUT. @default 60000
   */
  stepTimeoutMs?: number;
}

export const DEFAULT_PARSE_OPTIONS = Object.freeze({
  ocr: 'auto',
  ocrModel: 'paddleocr/pp-ocrv4',
  ocrDpi: 150,
  furniture: 'drop',
  maxBytes: MAX_DOCUMENT_BYTES,
  maxPages: 5000,
} as const satisfies Partial<ParseOptions>);

const ParseOptionsSchema = z.strictObject({
  ocr: z.enum(['auto', 'always', 'never']),
  ocrModel: z.string().min(1),
  ocrDpi: z.number().int().min(36).max(600),
  furniture: z.enum(['drop', 'keep']),
  maxBytes: z.number().int().positive(),
  maxPages: z.number().int().positive(),
  signal: z.custom<AbortSignal>((value) => value instanceof AbortSignal).optional(),
  onPage: z.custom<NonNullable<ParseOptions['onPage']>>((value) => typeof value === 'function').optional(),
  threads: z.number().int().min(1).max(64).optional(),
  threadMemoryMb: z.number().int().min(16).optional(),
  stepTimeoutMs: z.number().int().positive().optional(),
});

/** Fills defaults and checks the values; the result is frozen. Throws CONFIG_INVALID. */
export function resolveParseOptions(options: Partial<ParseOptions> = {}): Readonly<ParseOptions> {
  const defined = Object.fromEntries(Object.entries(options).filter(([, value]) => value !== undefined));
  const parsed = ParseOptionsSchema.safeParse({ ...DEFAULT_PARSE_OPTIONS, ...defined });
  if (!parsed.success) {
    const problems = parsed.error.issues.map((issue) => `${issue.path.join('.') || '(options)'}: ${issue.message}`).join('; ');
    throw new ShoalError(ErrorCode.CONFIG_INVALID, `invalid parse options: ${problems}`);
  }
  const resolved: ParseOptions = { ...parsed.data };
  return Object.freeze(resolved);
}
