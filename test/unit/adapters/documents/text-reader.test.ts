import { describe, expect, it } from 'vitest';
import { ErrorCode, hasErrorCode } from '../../../../adapters/protocol/errors.js';
import { decodeHtml, decodeText, markdownHeadings, requireText, stripFrontMatter } from '../../../../adapters/documents/text-reader.js';

describe('text decoding', () => {
  it('decodes UTF-8 (dropping a BOM), UTF-16 with a BOM, and falls back to Windows-1252', () => {
    expect(decodeText(new Uint8Array([0xef, 0xbb, 0xbf, ...new TextEncoder().encode('Grüße\r\nzwei\rdrei')]))).toBe('Grüße\nzwei\ndrei');
    expect(decodeText(new Uint8Array([0xff, 0xfe, 0x48, 0x00, 0x69, 0x00]))).toBe('Hi');
    expect(decodeText(new Uint8Array([0xfe, 0xff, 0x00, 0x48, 0x00, 0x69]))).toBe('Hi');
    // "café" in Latin-1: 0xE9 alone is not valid UTF-8.
    expect(decodeText(new Uint8Array([0x63, 0x61, 0x66, 0xe9]))).toBe('café');
  });

  it('reads UTF-16 without a byte order mark, UTF-8 with a stray bad byte, and an HTML page in its declared charset', () => {
    const hello = 'Hello, harbour pilots.\nSecond line.';
    const le = Buffer.from(hello, 'utf16le');
    const be = Buffer.from(le).swap16();
    expect(decodeText(le)).toBe(hello);
    expect(decodeText(be)).toBe(hello);
    // One Latin-1 byte in a UTF-8 file: the rest stays UTF-8 (it became "CafÃ©" before), the byte a U+FFFD.
    const mixed = Buffer.concat([Buffer.from('Café, 東京 and '), Buffer.from([0xe9]), Buffer.from(' more.')]);
    expect(decodeText(mixed)).toBe('Café, 東京 and \uFFFD more.');
    // Plain Latin-1 (no valid UTF-8 sequence at all) is still read as Windows-1252.
    expect(decodeText(Buffer.from([0x63, 0x61, 0x66, 0xe9, 0x20, 0x6e, 0x61, 0xef, 0x76, 0x65]))).toBe('café naïve');
    const cyrillic = Buffer.concat([Buffer.from('<html><head><meta charset="windows-1251"><title>t</title></head><body>'), Buffer.from([0xcf, 0xf0, 0xe8, 0xe2, 0xe5, 0xf2]), Buffer.from('</body></html>')]);
    expect(decodeHtml(cyrillic)).toContain('Привет');
    const shiftJis = Buffer.concat([Buffer.from('<html><head><meta http-equiv="Content-Type" content="text/html; charset=Shift_JIS"></head><body>'), Buffer.from([0x93, 0x8c, 0x8b, 0x9e]), Buffer.from('</body></html>')]);
    expect(decodeHtml(shiftJis)).toContain('東京');
    // A page declared as Latin-1 whose bytes are valid UTF-8 is read as UTF-8.
    expect(decodeHtml(Buffer.from('<meta charset="iso-8859-1"><p>Grüße</p>'))).toContain('Grüße');
  });

  it('cuts YAML front matter from Markdown and takes its title', () => {
    expect(stripFrontMatter('---\ntitle: "Pilot guide"\ntags: [a, b]\n---\n# Intro\n\nText.')).toEqual({ text: '# Intro\n\nText.', title: 'Pilot guide' });
    expect(stripFrontMatter('---\nlayout: post\n...\nBody.')).toEqual({ text: 'Body.' });
    // A thematic break at the top with no closing line is not front matter.
    expect(stripFrontMatter('---\nJust text.')).toEqual({ text: '---\nJust text.' });
    expect(markdownHeadings(stripFrontMatter('---\ntags: [x]\n---\nSome intro text.').text)).toEqual([]);
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
