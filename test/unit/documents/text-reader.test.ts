import { describe, expect, it } from 'vitest';
import { ErrorCode, hasErrorCode } from '../../../adapters/protocol/errors.js';
import { decodeText, markdownHeadings, requireText } from '../../../adapters/documents/text-reader.js';

describe('text decoding', () => {
  it('decodes UTF-8 (dropping a BOM), UTF-16 with a BOM, and falls back to Windows-1252', () => {
    expect(decodeText(new Uint8Array([0xef, 0xbb, 0xbf, ...new TextEncoder().encode('Grüße\r\nzwei\rdrei')]))).toBe('Grüße\nzwei\ndrei');
    expect(decodeText(new Uint8Array([0xff, 0xfe, 0x48, 0x00, 0x69, 0x00]))).toBe('Hi');
    expect(decodeText(new Uint8Array([0xfe, 0xff, 0x00, 0x48, 0x00, 0x69]))).toBe('Hi');
    // "café" in Latin-1: 0xE9 alone is not valid UTF-8.
    expect(decodeText(new Uint8Array([0x63, 0x61, 0x66, 0xe9]))).toBe('café');
  });

  it('refuses text with NUL characters and whitespace-only documents', () => {
    let caught: unknown;
    try {
      decodeText(new Uint8Array([0xff, 0xfe, 0x00, 0x00]));
    } catch (error) {
      caught = error;
    }
    expect(hasErrorCode(caught, ErrorCode.UNSUPPORTED_DOCUMENT)).toBe(true);
    expect(() => requireText(' \n\t ', 'text file')).toThrow(/no text/);
  });
});

describe('Markdown headings', () => {
  const text = [
    '# Harbour guide', // 0
    '',
    'Intro text with a # that is not a heading.',
    '',
    '## Tides and  currents ##',
    'Body.',
    '',
    'Setext title',
    '============',
    '',
    '```bash',
    '# a shell comment, not a heading',
    '```',
    '   ### Indented three spaces',
    '#NoSpace is not a heading',
  ].join('\n');

  it('finds ATX and setext headings with their offsets, skipping fenced code', () => {
    const headings = markdownHeadings(text);
    expect(headings.map((heading) => heading.text)).toEqual(['Harbour guide', 'Tides and  currents', 'Setext title', 'Indented three spaces']);
    for (const heading of headings) expect(text.slice(heading.offset, heading.offset + heading.text.length)).toBe(heading.text);
  });
});
