import type { AddressObject } from 'mailparser';
import { ErrorCode, ShoalError } from '../../protocol/errors.js';
import { htmlText } from '../html-reader.js';
import type { Heading } from '../text-reader.js';
import { defineFormat, whole } from './format.js';

/**
 * EML (an email as RFC 5322 text, MIME included): text that opens with a header block holding
 * From and one of To, Subject, Date or Message-ID. Read by mailparser into one page: the subject
 * as the page's heading and the document's title, then `From:`, `To:`, `Cc:` and `Date:` lines
 * (ISO 8601), then the body: the text/plain part, or when there is none the text/html part read
 * as an HTML page (its headings kept). Attachments (a forwarded message included) are not read;
 * other headers are left out.
 */

const LABEL = 'email';
/** A header field's start: a name of printable characters but `:`, then `:`. */
const FIELD = /^([!-9;-~]+):/;
const CONTINUATION = /^[ \t]/;
const SECOND_FIELDS = ['to', 'subject', 'date', 'message-id'];

/** True when the text opens with an RFC 5322 header block that names a sender and something else an email has. */
export function looksLikeEmail(head: string): boolean {
  const lines = head.split(/\r?\n/);
  const blank = lines.indexOf('');
  // Without a blank line in the window the last line may be cut mid-field.
  const block = blank === -1 ? lines.slice(0, -1) : lines.slice(0, blank);
  const names = new Set<string>();
  for (const [index, line] of block.entries()) {
    if (index > 0 && CONTINUATION.test(line)) continue;
    const name = FIELD.exec(line)?.[1];
    if (name === undefined) return false;
    names.add(name.toLowerCase());
  }
  return names.has('from') && SECOND_FIELDS.some((name) => names.has(name));
}

function addresses(value: AddressObject | AddressObject[] | undefined): string {
  if (value === undefined) return '';
  return (Array.isArray(value) ? value : [value]).map((address) => address.text).join(', ');
}

export const emlFormat = defineFormat({
  type: 'eml',
  sniff: { by: 'text', match: ({ head }) => (looksLikeEmail(head) ? { type: 'eml' } : null) },
  async open(bytes) {
    const { simpleParser } = await import('mailparser');
    let mail: Awaited<ReturnType<typeof simpleParser>>;
    try {
      // Only what is read: no text made from HTML (the HTML is read below), no HTML made from text, no image data URIs.
      mail = await simpleParser(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength), { skipHtmlToText: true, skipTextToHtml: true, skipImageLinks: true, skipTextLinks: true, keepCidLinks: true });
    } catch (error) {
      throw new ShoalError(ErrorCode.DOCUMENT_CORRUPT, `the ${LABEL} cannot be read: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
    }
    const subject = (mail.subject ?? '').replace(/\s+/g, ' ').trim();
    const header = [
      ['From', addresses(mail.from)],
      ['To', addresses(mail.to)],
      ['Cc', addresses(mail.cc)],
      ['Date', mail.date === undefined || Number.isNaN(mail.date.getTime()) ? '' : mail.date.toISOString()],
    ]
      .filter(([, value]) => value !== '')
      .map(([name, value]) => `${name}: ${value}`)
      .join('\n');
    const plain = (mail.text ?? '').replace(/\r\n?/g, '\n').trim();
    const html = mail.html;
    const body = plain.length === 0 && typeof html === 'string' ? htmlText(html) : { text: plain, headings: [] };
    if (subject.length === 0 && body.text.trim().length === 0) throw new ShoalError(ErrorCode.DOCUMENT_EMPTY, `the ${LABEL} has no subject and no body text`);
    const opening = [subject, header].filter((part) => part.length > 0).join('\n\n');
    const bodyAt = body.text.length > 0 ? opening.length + 2 : opening.length;
    const text = body.text.length > 0 ? `${opening}\n\n${body.text}` : opening;
    const headings: Heading[] = [...(subject.length > 0 ? [{ offset: 0, text: subject }] : []), ...body.headings.map((heading) => ({ offset: heading.offset + bodyAt, text: heading.text }))];
    return whole('eml', [{ page: 1, text, headings }], subject.length > 0 ? subject : undefined);
  },
});
