import { ErrorCode, ShoalError } from '../../protocol/errors.js';
import { defineFormat, tooLarge, type ImageFormat } from './format.js';

/** PNG, JPEG, TIFF (both byte orders) and WebP by their magic numbers; read by the OCR model, every page of a multi-page TIFF. */

function startsWith(bytes: Uint8Array, signature: readonly number[], at = 0): boolean {
  if (bytes.length < at + signature.length) return false;
  return signature.every((value, index) => bytes[at + index] === value);
}

const ascii = (text: string): number[] => [...text].map((char) => char.charCodeAt(0));

const PNG = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a];
const JPEG = [0xff, 0xd8, 0xff];
const TIFF_LE = [0x49, 0x49, 0x2a, 0x00];
const TIFF_BE = [0x4d, 0x4d, 0x00, 0x2a];
const RIFF = ascii('RIFF');
const WEBP = ascii('WEBP');

function imageFormatOf(bytes: Uint8Array): ImageFormat | null {
  if (startsWith(bytes, PNG)) return 'png';
  if (startsWith(bytes, JPEG)) return 'jpeg';
  if (startsWith(bytes, TIFF_LE) || startsWith(bytes, TIFF_BE)) return 'tiff';
  if (startsWith(bytes, RIFF) && startsWith(bytes, WEBP, 8)) return 'webp';
  return null;
}

/**
 * The pages after the first of a multi-page TIFF, each as a PNG the OCR model reads (it decodes the
 * first page of a file only); none for a single page. Over `maxPages` the document is too large.
 */
async function tiffPages(bytes: Uint8Array, maxPages: number): Promise<Uint8Array[]> {
  const { default: sharp } = await import('sharp');
  let pages: number;
  try {
    pages = (await sharp(bytes).metadata()).pages ?? 1;
  } catch (error) {
    throw new ShoalError(ErrorCode.DOCUMENT_CORRUPT, `the TIFF image cannot be read: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
  }
  if (pages > maxPages) throw tooLarge('maxPages', pages, maxPages, 'pages');
  const out: Uint8Array[] = [];
  for (let page = 1; page < pages; page++) {
    try {
      out.push(new Uint8Array(await sharp(bytes, { page }).png().toBuffer()));
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      // sharp's pixel limit guards memory: a page over it is too large, not damaged.
      const code = /pixel limit/i.test(message) ? ErrorCode.DOCUMENT_TOO_LARGE : ErrorCode.DOCUMENT_CORRUPT;
      throw new ShoalError(code, `page ${page + 1} of the TIFF image cannot be read: ${message}`, { cause: error });
    }
  }
  return out;
}

export const imageFormat = defineFormat({
  type: 'image',
  sniff: {
    by: 'signature',
    match: ({ bytes }) => {
      const format = imageFormatOf(bytes);
      return format === null ? null : { type: 'image', imageFormat: format };
    },
  },
  async open(bytes, { sniffed, maxPages }) {
    const image = bytes.slice();
    // A multi-page TIFF (a scanned fax or contract): every page is read, not the first alone.
    const morePages = sniffed.imageFormat === 'tiff' ? await tiffPages(bytes, maxPages) : [];
    if (morePages.length === 0) return { body: { kind: 'image', image }, transfer: [image.buffer] };
    return { body: { kind: 'image', image, morePages }, transfer: [image.buffer, ...morePages.map((page) => page.buffer as ArrayBuffer)] };
  },
});
