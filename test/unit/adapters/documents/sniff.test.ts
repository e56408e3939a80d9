import { describe, expect, it } from 'vitest';
import { sniffDocument } from '../../../../adapters/documents/sniff.js';
import { ErrorCode, hasErrorCode } from '../../../../adapters/protocol/errors.js';

const bytes = (text: string): Uint8Array => new TextEncoder().encode(text);
const concat = (...parts: (number[] | string)[]): Uint8Array => new Uint8Array(parts.flatMap((part) => (typeof part === 'string' ? [...bytes(part)] : part)));

function refusal(data: Uint8Array, name: string): unknown {
  try {
    sniffDocument(data, name);
  } catch (error) {
    return error;
  }
  return null;
}

describe('document type sniffing', () => {
  it('goes by content before the name: a PDF named .txt or .md is a PDF, a PNG named .pdf is an image', () => {
    expect(sniffDocument(bytes('%PDF-1.7\n1 0 obj'), 'notes.txt')).toEqual({ type: 'pdf' });
    expect(sniffDocument(bytes('%PDF-1.4\n'), 'readme.md')).toEqual({ type: 'pdf' });
    expect(sniffDocument(concat([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a], 'rest'), 'scan.pdf')).toEqual({ type: 'image', imageFormat: 'png' });
  });

  it('finds a PDF header behind leading junk, as readers do within the first KiB', () => {
    expect(sniffDocument(concat('garbage line\n', '%PDF-1.3\n'), 'x.bin').type).toBe('pdf');
  });

  it('recognizes JPEG, both TIFF byte orders and WebP', () => {
    expect(sniffDocument(concat([0xff, 0xd8, 0xff, 0xe0], 'JFIF'), 'a').imageFormat).toBe('jpeg');
    expect(sniffDocument(concat([0x49, 0x49, 0x2a, 0x00, 8, 0, 0, 0]), 'a').imageFormat).toBe('tiff');
    expect(sniffDocument(concat([0x4d, 0x4d, 0x00, 0x2a, 0, 0, 0, 8]), 'a').imageFormat).toBe('tiff');
    expect(sniffDocument(concat('RIFF', [0x24, 0, 0, 0], 'WEBPVP8 '), 'a').imageFormat).toBe('webp');
    // RIFF without WEBP is a WAV or AVI: binary and refused.
    expect(hasErrorCode(refusal(concat('RIFF', [0x24, 0, 0, 0], 'WAVEfmt ', [0, 0, 0, 0]), 'a.webp'), ErrorCode.UNSUPPORTED_DOCUMENT)).toBe(true);
  });

  it('tells HTML from text by its markers (doctype, <html>, after a BOM, whitespace or a comment), whatever the name', () => {
    expect(sniffDocument(bytes('<!DOCTYPE html><html><body>x</body></html>'), 'page.txt').type).toBe('html');
    expect(sniffDocument(concat([0xef, 0xbb, 0xbf], '\n  <html lang="en">'), 'page').type).toBe('html');
    expect(sniffDocument(bytes('<!-- saved --> <html><p>x'), 'x.md').type).toBe('html');
    expect(sniffDocument(bytes('<p>a fragment without markers</p>'), 'frag.html').type).toBe('html');
    // Markdown that merely contains tags further down is not HTML.
    expect(sniffDocument(bytes('# Title\n\n<div>inline html</div>\n'), 'doc.md').type).toBe('markdown');
  });

  it('takes Markdown from the extension, plain text otherwise', () => {
    expect(sniffDocument(bytes('# Notes\n'), 'notes.md').type).toBe('markdown');
    expect(sniffDocument(bytes('# Notes\n'), 'NOTES.MARKDOWN').type).toBe('markdown');
    expect(sniffDocument(bytes('# Notes\n'), 'notes.txt').type).toBe('text');
    expect(sniffDocument(bytes('plain words'), 'README').type).toBe('text');
    expect(sniffDocument(bytes('Grüße aus Köln'), 'de.txt').type).toBe('text');
  });

  it('refuses other binaries with UNSUPPORTED_DOCUMENT, naming known kinds, and empty input with DOCUMENT_EMPTY', () => {
    // A ZIP archive that is no document format (its directory unreadable, its name not an Office or EPUB one).
    const zip = refusal(concat([0x50, 0x4b, 0x03, 0x04], 'notes.txt'), 'archive.zip');
    expect(hasErrorCode(zip, ErrorCode.UNSUPPORTED_DOCUMENT)).toBe(true);
    expect(String(zip)).toMatch(/ZIP/);
    expect(hasErrorCode(refusal(concat('GIF89a', [1, 0, 1, 0]), 'a.gif'), ErrorCode.UNSUPPORTED_DOCUMENT)).toBe(true);
    const random = new Uint8Array(4096).map((_, index) => (index * 7919) % 256);
    expect(hasErrorCode(refusal(random, 'data.txt'), ErrorCode.UNSUPPORTED_DOCUMENT)).toBe(true);
    expect(hasErrorCode(refusal(new Uint8Array(0), 'empty.txt'), ErrorCode.DOCUMENT_EMPTY)).toBe(true);
  });

  it('takes UTF-16 text (with or without a byte order mark, either byte order) as text, Markdown or HTML', () => {
    const le = Buffer.from('Harbour notes.\nTide tables follow.', 'utf16le');
    const be = Buffer.from(le).swap16();
    expect(sniffDocument(Buffer.concat([Buffer.from([0xff, 0xfe]), le]), 'notes.txt')).toEqual({ type: 'text' });
    expect(sniffDocument(Buffer.concat([Buffer.from([0xfe, 0xff]), be]), 'notes.md')).toEqual({ type: 'markdown' });
    expect(sniffDocument(le, 'notes.txt')).toEqual({ type: 'text' });
    expect(sniffDocument(be, 'notes')).toEqual({ type: 'text' });
    expect(sniffDocument(Buffer.from('<!doctype html><html><body>Hi</body></html>', 'utf16le'), 'page')).toEqual({ type: 'html' });
  });
});
