import { constants, createInflate, inflateSync } from 'node:zlib';
import { ErrorCode, ShoalError } from '../protocol/errors.js';

/**
 * Decompression bombs, refused before pdfjs opens the file. pdfjs inflates a stream whole into
 * memory (ArrayBuffers, outside a thread's heap limit): a 1 MB PDF whose content stream inflates
 * to 1 GiB took a parse thread to 2.64 GB, and a 389 KB PDF painting a 20000×20000 image to
 * 4.71 GB. Every stream object lies in the file's bytes in plain sight (a stream is never inside
 * an object stream), so each Flate stream is inflated here once, counting bytes and keeping none,
 * and each image XObject's /Width and /Height are read from its dictionary.
 *
 * Not measured: streams whose first filter is not Flate (LZW, ASCII85 before Flate), inline images
 * inside content streams, and streams of an encrypted file (pdfjs refuses those without the
 * password, and Shoal supplies none).
 */

export interface PdfLimits {
  maxStreamBytes: number;
  maxDocumentStreamBytes: number;
  maxImagePixels: number;
  maxDocumentImagePixels: number;
}

export const PDF_LIMITS: Readonly<PdfLimits> = Object.freeze({
  /** Inflated bytes of one stream (a page's content stream, an image, a font). */
  maxStreamBytes: 128 * 1024 * 1024,
  /** Inflated bytes of all the streams of a document. */
  maxDocumentStreamBytes: 2 * 1024 * 1024 * 1024,
  /** Pixels of one image (a 600 dpi A3 scan has 70 million). */
  maxImagePixels: 100_000_000,
  /** Pixels of all the images of a document (about 700 pages scanned at 600 dpi A4). */
  maxDocumentImagePixels: 25_000_000_000,
});


/** Compressed streams up to this size are inflated in one synchronous call (deflate expands at most ~1032×). */
const SYNC_INFLATE_INPUT = 4 * 1024;
/** How far before `stream` its dictionary may start. */
const MAX_DICTIONARY_CHARS = 64 * 1024;

function tooLarge(message: string, limit: string, size: number, max: number): ShoalError {
  return new ShoalError(ErrorCode.DOCUMENT_TOO_LARGE, message, { details: { limit, size, max } });
}

/** Bytes `data` inflates to, counted up to `limit` + 1 and kept nowhere; a damaged stream counts what came out before the damage. */
async function inflatedBytes(data: Uint8Array, limit: number): Promise<number> {
  if (data.length <= SYNC_INFLATE_INPUT) {
    try {
      return inflateSync(data, { finishFlush: constants.Z_SYNC_FLUSH }).length;
    } catch {
      // Not zlib data at all (pdfjs reports it if the page needs it): nothing inflated.
      return 0;
    }
  }
  return new Promise((resolve) => {
    const inflate = createInflate({ finishFlush: constants.Z_SYNC_FLUSH });
    let total = 0;
    let settled = false;
    const finish = (): void => {
      if (settled) return;
      settled = true;
      inflate.destroy();
      resolve(total);
    };
    inflate.on('data', (chunk: Buffer) => {
      total += chunk.length;
      if (total > limit) finish();
    });
    inflate.on('end', finish);
    inflate.on('error', finish);
    inflate.end(data);
  });
}

interface StreamFacts {
  dictionary: string;
  data: Uint8Array;
}

/** Every `stream … endstream` of the file with the dictionary before it. */
function* streams(bytes: Uint8Array): Generator<StreamFacts> {
  const buffer = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let at = buffer.indexOf('stream', 0, 'latin1');
  while (at >= 0) {
    const isEnd = at >= 3 && buffer.toString('latin1', at - 3, at) === 'end';
    if (isEnd) {
      at = buffer.indexOf('stream', at + 6, 'latin1');
      continue;
    }
    let start = at + 6;
    if (buffer[start] === 0x0d) start += 1;
    if (buffer[start] === 0x0a) start += 1;
    const end = buffer.indexOf('endstream', start, 'latin1');
    const stop = end < 0 ? buffer.length : end;
    const from = Math.max(0, at - MAX_DICTIONARY_CHARS);
    const objectAt = buffer.lastIndexOf(' obj', at, 'latin1');
    const dictionary = buffer.toString('latin1', objectAt >= from ? objectAt : from, at);
    yield { dictionary, data: bytes.subarray(start, stop) };
    if (end < 0) return;
    at = buffer.indexOf('stream', end + 9, 'latin1');
  }
}

/** A number entry of a dictionary (`/Width 800`, or `/Width 12 0 R` resolved in the file). */
function numberEntry(dictionary: string, key: string, resolve: (object: number) => number | null): number | null {
  const match = new RegExp(`/${key}\\s+(\\d+)(?:\\s+(\\d+)\\s+R)?`).exec(dictionary);
  if (match === null) return null;
  if (match[2] !== undefined) return resolve(Number(match[1]));
  return Number(match[1]);
}

/** Whether the first (or only) filter is Flate. */
function flateFirst(dictionary: string): boolean {
  return /\/Filter\s*(?:\[\s*)?\/(?:FlateDecode|Fl)\b/.test(dictionary);
}

/**
 * Throws DOCUMENT_TOO_LARGE when a stream, an image or the document as a whole is over its limit
 * (PDF_LIMITS). Called in a parse thread before pdfjs sees the file.
 */
export async function checkPdfBudget(bytes: Uint8Array, limits: Readonly<PdfLimits> = PDF_LIMITS): Promise<void> {
  const text = (object: number): number | null => {
    const buffer = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    const at = buffer.indexOf(`\n${object} 0 obj`, 0, 'latin1');
    if (at < 0) return null;
    const match = /^\s*\d+\s+0\s+obj\s*(\d+)/.exec(buffer.toString('latin1', at, at + 64));
    return match === null ? null : Number(match[1]);
  };
  let inflated = 0;
  let pixels = 0;
  for (const stream of streams(bytes)) {
    if (/\/Subtype\s*\/Image\b/.test(stream.dictionary)) {
      const width = numberEntry(stream.dictionary, 'Width', text) ?? 0;
      const height = numberEntry(stream.dictionary, 'Height', text) ?? 0;
      const image = width * height;
      if (image > limits.maxImagePixels) throw tooLarge(`the PDF has an image of ${width}×${height} pixels, over the limit of ${limits.maxImagePixels} pixels per image`, 'maxImagePixels', image, limits.maxImagePixels);
      pixels += image;
      if (pixels > limits.maxDocumentImagePixels) throw tooLarge(`the PDF's images have over ${limits.maxDocumentImagePixels} pixels in all`, 'maxDocumentImagePixels', pixels, limits.maxDocumentImagePixels);
    }
    if (!flateFirst(stream.dictionary)) continue;
    const budget = Math.min(limits.maxStreamBytes, limits.maxDocumentStreamBytes - inflated);
    const size = await inflatedBytes(stream.data, budget);
    if (size > limits.maxStreamBytes) throw tooLarge(`the PDF has a stream that inflates to over ${limits.maxStreamBytes} bytes (a decompression bomb?)`, 'maxStreamBytes', size, limits.maxStreamBytes);
    inflated += size;
    if (inflated > limits.maxDocumentStreamBytes) throw tooLarge(`the PDF's streams inflate to over ${limits.maxDocumentStreamBytes} bytes in all`, 'maxDocumentStreamBytes', inflated, limits.maxDocumentStreamBytes);
  }
}
