import { ErrorCode, ShoalError } from '../protocol/errors.js';
import { declaredHtmlCharset, decodeDocumentBytes } from './encoding.js';

/**
 * Decoding of text documents (the encoding is decided in encoding.ts: byte order marks, UTF-16
 * without one, UTF-8, an HTML page's declared charset, Windows-1252), Markdown headings and front
 * matter. Line endings become '\n'.
 */

/**
 * The document readers' version, part of an ingest's settings hash. 2: UTF-16 without a byte
 * order mark, UTF-8 with a few bad bytes, an HTML page's declared charset, Markdown front matter
 * cut, every page of a multi-page TIFF, HTML elements marked hidden left out.
 */
export const TEXT_RULES = 2;

export interface Heading {
  /** Character offset of the heading's text in the page text. */
  offset: number;
  text: string;
}

export function decodeText(bytes: Uint8Array, declared: string | null = null): string {
  const text = decodeDocumentBytes(bytes, declared);
  if (text.includes('\u0000')) throw new ShoalError(ErrorCode.UNSUPPORTED_DOCUMENT, 'the text contains NUL characters: it is a binary file, not text');
  return text.replace(/\r\n?/g, '\n');
}

/** An HTML page's text: its bytes decide the encoding, then the charset its `<meta>` declares, then Windows-1252. */
export function decodeHtml(bytes: Uint8Array): string {
  return decodeText(bytes, declaredHtmlCharset(bytes));
}

/** Lines searched for the end of a front matter block: a longer one is not front matter. */
const FRONT_MATTER_MAX_LINES = 200;

/**
 * A Markdown file's YAML front matter (`---` first line, up to a `---` or `...` line), cut from
 * the text: it is metadata, not prose, and its closing `---` would read as the underline of a
 * setext heading. Its `title:` is returned for the document's title.
 */
export function stripFrontMatter(text: string): { text: string; title?: string } {
  if (!/^---[ \t]*\n/.test(text)) return { text };
  const lines = text.split('\n');
  const end = lines.slice(1, FRONT_MATTER_MAX_LINES).findIndex((line) => /^(---|\.\.\.)[ \t]*$/.test(line));
  if (end === -1) return { text };
  const block = lines.slice(1, end + 1);
  const rest = lines.slice(end + 2).join('\n');
  const title = block.map((line) => /^title:[ \t]*(.+?)[ \t]*$/.exec(line)?.[1]).find((value) => value !== undefined);
  const unquoted = title?.replace(/^(["'])(.*)\1$/, '$2').trim();
  return unquoted === undefined || unquoted === '' ? { text: rest } : { text: rest, title: unquoted };
}

/** Throws DOCUMENT_EMPTY when there is nothing but whitespace. */
export function requireText(text: string, what: string): string {
  if (text.trim().length === 0) throw new ShoalError(ErrorCode.DOCUMENT_EMPTY, `the ${what} has no text`);
  return text;
}

const ATX_HEADING = /^ {0,3}(#{1,6})[ \t]+(.+?)[ \t]*#*[ \t]*$/;
const SETEXT_UNDERLINE = /^ {0,3}(=+|-+)[ \t]*$/;
const FENCE = /^ {0,3}(```|~~~)/;

/**
 * Headings of a Markdown text: ATX (`# Title`) and setext (a line underlined with `===` or `---`),
 * skipping fenced code blocks, where `#` starts a comment, not a heading.
 */
export function markdownHeadings(text: string): Heading[] {
  const headings: Heading[] = [];
  const lines = text.split('\n');
  let offset = 0;
  let fence: string | null = null;
  let previous: { offset: number; text: string } | null = null;
  for (const line of lines) {
    const fenceMatch = FENCE.exec(line);
    if (fenceMatch !== null) {
      const marker = fenceMatch[1] ?? '';
      fence = fence === null ? marker : fence === marker ? null : fence;
      previous = null;
    } else if (fence === null) {
      const atx = ATX_HEADING.exec(line);
      if (atx !== null && atx[2] !== undefined) {
        headings.push({ offset: offset + line.indexOf(atx[2]), text: atx[2] });
        previous = null;
      } else if (SETEXT_UNDERLINE.test(line) && previous !== null) {
        headings.push(previous);
        previous = null;
      } else {
        const trimmed = line.trim();
        previous = trimmed.length > 0 ? { offset: offset + line.indexOf(trimmed), text: trimmed } : null;
      }
    }
    offset += line.length + 1;
  }
  return headings;
}
