import type { DocumentType } from '../../protocol/document-types.js';
import { ErrorCode, ShoalError } from '../../protocol/errors.js';
import type { DocumentFormat } from './format.js';
import { docxFormat } from './docx.js';
import { emlFormat } from './eml.js';
import { epubFormat } from './epub.js';
import { htmlFormat } from './html.js';
import { imageFormat } from './image.js';
import { markdownFormat } from './markdown.js';
import { pdfFormat } from './pdf.js';
import { pptxFormat } from './pptx.js';
import { textFormat } from './text.js';
import { xlsxFormat } from './xlsx.js';

/**
 * Every document format, in sniffing order: signature formats are tried in this order, then text
 * formats in this order (plain text last: it takes any text). Adding a format: its name in
 * adapters/protocol/document-types.ts, its file in this folder, its line here (docs/architecture.md,
 * "Adding a document format"); the check below refuses the build until every name has its format.
 */
export const FORMATS = [
  pdfFormat,
  imageFormat,
  docxFormat,
  pptxFormat,
  xlsxFormat,
  epubFormat,
  emlFormat,
  htmlFormat,
  markdownFormat,
  textFormat,
] as const satisfies readonly DocumentFormat[];

type Listed = (typeof FORMATS)[number]['type'];
/** Compile-time: a document type without a format here is an error. */
const everyTypeListed: [Exclude<DocumentType, Listed>] extends [never] ? true : never = true;
void everyTypeListed;

const BY_TYPE = new Map<DocumentType, DocumentFormat>(FORMATS.map((format) => [format.type, format]));

export function formatOf(type: DocumentType): DocumentFormat {
  const format = BY_TYPE.get(type);
  // Unreachable while the compile-time check above holds.
  if (format === undefined) throw new ShoalError(ErrorCode.INTERNAL, `no document format for ${type}`);
  return format;
}
