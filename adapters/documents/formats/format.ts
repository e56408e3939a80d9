import type { Transferable } from 'node:worker_threads';
import type { DocumentType } from '../../protocol/document-types.js';
import { ErrorCode, ShoalError } from '../../protocol/errors.js';
import type { HandlerResult } from '../../support/thread-rpc.js';
import type { Opened, PageRead, ParseRequest } from '../parse-messages.js';
import type { ZipMembers } from './zip-members.js';

/**
 * What one document format is to the parse thread: how its content is recognized and how it is
 * read. Formats live one per file in this folder and are listed, in sniffing order, in
 * registry.ts. A format module imports its heavy libraries (pdfjs, sharp, mammoth...) inside
 * `open`, so sniffing on the main thread (the gateway's upload check) loads none of them.
 */

export type ImageFormat = 'png' | 'jpeg' | 'tiff' | 'webp';

export interface Sniffed {
  type: DocumentType;
  /** Set for images. */
  imageFormat?: ImageFormat;
}

/** What signature detectors see: the bytes, the name's extension and, for a ZIP archive, its members. */
export interface SignatureProbe {
  readonly bytes: Uint8Array;
  /** Lower-case extension of the document's name, '' when it has none. */
  readonly extension: string;
  /** The member names of a ZIP archive (null for anything else). */
  readonly zip: ZipMembers | null;
}

/** What text detectors see, once the bytes are known to be text. */
export interface TextProbe {
  readonly bytes: Uint8Array;
  readonly extension: string;
  /** The first bytes decoded (UTF-8 or UTF-16), byte order mark and leading whitespace removed. */
  readonly head: string;
}

/**
 * `signature` formats are looked for first, by magic bytes or ZIP members; then known unsupported
 * binaries are refused; then, if the bytes are text, the `text` formats are tried in order (the
 * last, plain text, takes anything).
 */
export type FormatSniffer =
  | { by: 'signature'; match: (probe: SignatureProbe) => Sniffed | null }
  | { by: 'text'; match: (probe: TextProbe) => Sniffed | null };

export interface OpenContext {
  /** File name or URI, for messages and the extension. */
  name: string;
  sniffed: Sniffed;
  maxBytes: number;
  maxPages: number;
}

type PageRequest = Extract<ParseRequest, { type: 'page' }>;

/** A document read page by page after it is opened (PDFs): its later `page` and `close` requests. */
export interface PagedDocument {
  read(request: PageRequest): Promise<HandlerResult<PageRead>>;
  close(): Promise<void>;
}

type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;

/** An `opened` answer without what the parse thread adds for every format (hash, size). */
export type OpenedBody = DistributiveOmit<Opened, 'type' | 'contentHash' | 'bytes'>;

export interface FormatOpened {
  body: OpenedBody;
  transfer?: Transferable[];
  paged?: PagedDocument;
}

export interface DocumentFormat<T extends DocumentType = DocumentType> {
  readonly type: T;
  readonly sniff: FormatSniffer;
  open(bytes: Uint8Array, context: OpenContext): Promise<FormatOpened>;
}

export function defineFormat<T extends DocumentType>(format: DocumentFormat<T>): DocumentFormat<T> {
  return Object.freeze(format);
}

export function tooLarge(what: string, size: number, limit: number, unit: string): ShoalError {
  return new ShoalError(ErrorCode.DOCUMENT_TOO_LARGE, `the document has ${size} ${unit}, over the limit of ${limit} ${unit} (${what})`, {
    details: { limit: what, size, max: limit },
  });
}

/** A document read whole, as one or more pages with their headings. */
export function whole(documentType: Extract<OpenedBody, { kind: 'whole' }>['documentType'], pages: Extract<OpenedBody, { kind: 'whole' }>['pages'], title: string | undefined): FormatOpened {
  return { body: { kind: 'whole', documentType, pages, ...(title === undefined ? {} : { title }) } };
}
