import { ErrorCode, ShoalError } from '../protocol/errors.js';

/**
 * Decoding of text documents: UTF-8 (with or without a byte order mark) when the bytes are valid
 * UTF-8, UTF-16 when a byte order mark says so, else Windows-1252 (a superset of Latin-1, the usual
 * encoding of older text files). Line endings become '\n'.
 */

export interface Heading {
  /** Character offset of the heading's text in the page text. */
  offset: number;
  text: string;
}

export function decodeText(bytes: Uint8Array): string {
  let text: string;
  if (bytes[0] === 0xff && bytes[1] === 0xfe) text = new TextDecoder('utf-16le').decode(bytes.subarray(2));
  else if (bytes[0] === 0xfe && bytes[1] === 0xff) text = new TextDecoder('utf-16be').decode(bytes.subarray(2));
  else {
    try {
      // ignoreBOM: false (the default) drops a UTF-8 byte order mark.
      text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
    } catch {
      text = new TextDecoder('windows-1252').decode(bytes);
    }
  }
  if (text.includes('\u0000')) throw new ShoalError(ErrorCode.UNSUPPORTED_DOCUMENT, 'the text contains NUL characters: it is a binary file, not text');
  return text.replace(/\r\n?/g, '\n');
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
