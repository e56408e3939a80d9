import { ErrorCode, ShoalError } from '../protocol/errors.js';
import { decodeWith, utf16Encoding } from './encoding.js';
import type { Sniffed } from './formats/format.js';
import { FORMATS } from './formats/registry.js';
import { zipMembers } from './formats/zip-members.js';

/**
 * The kind of a document, decided from its first bytes (magic numbers) and only then from its
 * name: a PDF named `.txt` is a PDF, a PNG named `.pdf` is an image. The formats themselves say
 * what they look like (formats/registry.ts, in order): signature formats first, then known
 * unsupported binaries are refused by name, then text formats if the bytes are text. Other
 * binaries are refused.
 */

export type { ImageFormat, Sniffed } from './formats/format.js';
export type SniffedType = Sniffed['type'];

/** How many leading bytes are looked at for text formats' markers and binary content. */
const SNIFF_WINDOW = 8192;

function startsWith(bytes: Uint8Array, signature: readonly number[], at = 0): boolean {
  if (bytes.length < at + signature.length) return false;
  return signature.every((value, index) => bytes[at + index] === value);
}

const ascii = (text: string): number[] => [...text].map((char) => char.charCodeAt(0));

const OLE2 = [0xd0, 0xcf, 0x11, 0xe0];

/** Known binary formats refused by name in the error, so users see what they fed in. */
const KNOWN_BINARIES: readonly { name: string; signature: readonly number[] }[] = [
  { name: 'a gzip archive', signature: [0x1f, 0x8b] },
  { name: 'a GIF image', signature: ascii('GIF8') },
  { name: 'an ELF executable', signature: [0x7f, 0x45, 0x4c, 0x46] },
  { name: 'an OLE2 file (legacy Office document: .doc, .xls, .ppt)', signature: OLE2 },
];

/**
 * True when the bytes look like text: no NUL bytes and few control characters in the window.
 * (Full UTF-8 validation happens when the text is decoded.)
 */
export function looksLikeText(bytes: Uint8Array, window = SNIFF_WINDOW): boolean {
  return fewControls(Math.min(bytes.length, window), (i) => bytes[i] ?? 0);
}

/**
 * No NUL and at most 1 % control codes among `length` codes (bytes, or the characters of decoded
 * UTF-16 text, whose bytes are half zeros).
 */
function fewControls(length: number, codeAt: (i: number) => number): boolean {
  let control = 0;
  for (let i = 0; i < length; i++) {
    const code = codeAt(i);
    if (code === 0) return false;
    // Tab, line feed, form feed, carriage return and escape occur in real text files.
    if (code < 0x20 && code !== 0x09 && code !== 0x0a && code !== 0x0c && code !== 0x0d && code !== 0x1b) control++;
  }
  return control <= length * 0.01;
}

/** The stream name Office gives an encrypted OOXML package inside its OLE2 wrapper, as the directory stores it (UTF-16LE). */
const ENCRYPTED_PACKAGE = Buffer.from('EncryptedPackage', 'utf16le');

function isEncryptedOffice(bytes: Uint8Array): boolean {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).indexOf(ENCRYPTED_PACKAGE) >= 0;
}

function binary(): ShoalError {
  return new ShoalError(ErrorCode.UNSUPPORTED_DOCUMENT, 'the content is binary and of no supported kind (PDF, DOCX, PPTX, XLSX, EPUB, PNG, JPEG, TIFF, WebP, HTML, Markdown, email, text)');
}

function extensionOf(name: string): string {
  const base = name.split(/[\\/]/).pop() ?? '';
  const dot = base.lastIndexOf('.');
  return dot <= 0 ? '' : base.slice(dot + 1).toLowerCase();
}

/** The start of the text (UTF-16 or, after the binary check, UTF-8), byte order mark and leading whitespace removed; null when binary. */
function textHead(bytes: Uint8Array): string | null {
  const window = bytes.subarray(0, Math.min(bytes.length, SNIFF_WINDOW));
  // UTF-16 text is half zero bytes: it is told by its byte order mark or by where the zeros fall, and judged on its characters.
  const utf16 = utf16Encoding(bytes);
  if (utf16 !== null) {
    const head = decodeWith(window.subarray(0, window.length & ~1), utf16);
    if (!fewControls(head.length, (i) => head.charCodeAt(i))) return null;
    return head.replace(/^\uFEFF/, '').trimStart();
  }
  if (!looksLikeText(bytes)) return null;
  return new TextDecoder('utf-8').decode(window).replace(/^\uFEFF/, '').trimStart();
}

/**
 * The document type of `bytes`; `name` (a path or URI) only separates Markdown from plain text and
 * lets an `.html` file without markers still be read as HTML. Throws UNSUPPORTED_DOCUMENT for
 * binaries of no supported format, DOCUMENT_EMPTY for no bytes.
 */
export function sniffDocument(bytes: Uint8Array, name: string): Sniffed {
  if (bytes.length === 0) throw new ShoalError(ErrorCode.DOCUMENT_EMPTY, 'the document has no bytes');
  const extension = extensionOf(name);
  const zip = zipMembers(bytes);
  for (const format of FORMATS) {
    if (format.sniff.by !== 'signature') continue;
    const sniffed = format.sniff.match({ bytes, extension, zip });
    if (sniffed !== null) return sniffed;
  }
  if (zip !== null) {
    throw new ShoalError(
      ErrorCode.UNSUPPORTED_DOCUMENT,
      zip.complete
        ? 'the content is a ZIP archive that is not a DOCX, PPTX, XLSX or EPUB document (none of word/document.xml, ppt/presentation.xml, xl/workbook.xml, an EPUB mimetype)'
        : 'the content is a ZIP archive whose directory cannot be read (truncated?) and whose name is not .docx, .pptx, .xlsx or .epub',
    );
  }
  if (startsWith(bytes, OLE2) && isEncryptedOffice(bytes)) {
    throw new ShoalError(ErrorCode.DOCUMENT_ENCRYPTED, 'the content is a password-protected Office document (an encrypted DOCX, PPTX or XLSX is an OLE2 file holding an EncryptedPackage): save it without a password');
  }
  const known = KNOWN_BINARIES.find((entry) => startsWith(bytes, entry.signature));
  if (known !== undefined) throw new ShoalError(ErrorCode.UNSUPPORTED_DOCUMENT, `the content is ${known.name}, not a PDF, Office, EPUB, image, HTML, Markdown, email or text document`);
  const head = textHead(bytes);
  if (head === null) throw binary();
  for (const format of FORMATS) {
    if (format.sniff.by !== 'text') continue;
    const sniffed = format.sniff.match({ bytes, extension, head });
    if (sniffed !== null) return sniffed;
  }
  // Unreachable: plain text takes any text.
  return { type: 'text' };
}
