import { extname } from 'node:path';
import { checkMetadata, type DocumentMetadata } from '../../adapters/protocol/metadata.js';
import type { DocumentSource, ParsedDocument } from './document.js';

/**
 * The metadata stored with a document's chunks: what its source gave (a JSON Lines record's
 * `metadata` and `--metadata-fields`, a document job's `metadata`), over what Shoal reads from a
 * file itself: `title` (a PDF's info dictionary, Markdown front matter or first heading, HTML
 * `<title>`; a reader that finds one sets ParsedDocument.title), `mtime` (ISO 8601, for local
 * files), `size` (bytes) and `mime`. Inline text records get no automatic fields: their text has
 * no file around it. The sum is checked against the metadata bounds (a long title counts).
 */

/** Longest automatic title kept (a PDF title field can hold a whole abstract). */
const MAX_TITLE_CHARS = 500;

const MIME_BY_TYPE: Readonly<Record<string, string>> = {
  pdf: 'application/pdf',
  text: 'text/plain',
  markdown: 'text/markdown',
  html: 'text/html',
  docx: 'application/vnd.openxmlformats-officedocument.wordprocessingml.document',
  pptx: 'application/vnd.openxmlformats-officedocument.presentationml.presentation',
  xlsx: 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet',
  epub: 'application/epub+zip',
  eml: 'message/rfc822',
};

const IMAGE_MIME: Readonly<Record<string, string>> = {
  '.png': 'image/png', '.jpg': 'image/jpeg', '.jpeg': 'image/jpeg', '.tif': 'image/tiff', '.tiff': 'image/tiff', '.webp': 'image/webp',
};

/** The media type of a parsed document: by the type the reader found (an image by its extension). */
export function mimeOf(type: string, name: string): string {
  if (type === 'image') return IMAGE_MIME[extname(name).toLowerCase()] ?? 'image/*';
  return MIME_BY_TYPE[type] ?? 'application/octet-stream';
}

function fileMetadata(source: DocumentSource, document: ParsedDocument): DocumentMetadata {
  const title = document.title?.trim();
  return {
    ...(title === undefined || title === '' ? {} : { title: title.length > MAX_TITLE_CHARS ? `${title.slice(0, MAX_TITLE_CHARS - 1)}…` : title }),
    ...(source.modified === undefined ? {} : { mtime: source.modified }),
    size: document.bytes,
    mime: mimeOf(document.type, source.path ?? source.uri),
  };
}

/** The document's metadata, or undefined when it has none; INVALID_INPUT naming the source when over the bounds. */
export function documentMetadata(source: DocumentSource, document: ParsedDocument): DocumentMetadata | undefined {
  const automatic = source.text === undefined ? fileMetadata(source, document) : undefined;
  if (automatic === undefined && source.metadata === undefined) return undefined;
  // A source's own metadata was checked where it came in (records, HTTP), but a document job's wire schema is looser, and the sum may be too big.
  return checkMetadata({ ...automatic, ...source.metadata }, automatic === undefined ? source.uri : `${source.uri} (its metadata with the automatic file fields)`);
}
