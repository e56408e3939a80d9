import sharp from 'sharp';
import { ErrorCode, ShoalError } from '../../protocol/errors.js';

/**
 * Decoding of an encoded image (JPEG, PNG, WebP, GIF, TIFF, AVIF...) into 8-bit RGB, shared by every
 * image family. EXIF orientation is applied, transparency is flattened onto white, and the pixel
 * count is checked from the header before any pixel is decoded, so a 20000×20000 PNG is refused
 * cheaply. Runs in prep threads only (sharp uses libuv's pool, but the copies are CPU work).
 */

export interface RgbImage {
  /** Interleaved RGB, row-major, 3 bytes per pixel. */
  data: Uint8Array;
  width: number;
  height: number;
}

export interface DecodeLimits {
  maxPixels: number;
}

/**
 * What the bytes look like, in words: never the bytes themselves, which may come from a fetched
 * URL (an error message must not echo a remote server's response).
 */
function describe(bytes: Uint8Array): string {
  if (bytes.length === 0) return 'empty data';
  const head = Buffer.from(bytes.subarray(0, 16)).toString('latin1').trimStart();
  if (head.startsWith('%PDF-')) return 'a PDF document';
  if (/^<(!doctype|html|\?xml|svg)/i.test(head)) return `an HTML, XML or SVG document of ${bytes.length} bytes`;
  if (head.startsWith('{') || head.startsWith('[')) return `JSON-like text of ${bytes.length} bytes`;
  return `${bytes.length} bytes in no image format sharp reads`;
}

export async function decodeRgb(bytes: Uint8Array, limits: DecodeLimits): Promise<RgbImage> {
  let width: number | undefined;
  let height: number | undefined;
  let format: string | undefined;
  try {
    // Header only; sharp's own pixel limit must not fire here, or a huge image reads as "unsupported".
    const meta = await sharp(bytes, { failOn: 'truncated', limitInputPixels: false }).metadata();
    width = meta.width;
    height = meta.height;
    format = meta.format;
  } catch (error) {
    throw new ShoalError(ErrorCode.INVALID_INPUT, `not a supported image (${describe(bytes)}): ${String(error instanceof Error ? error.message : error)}`, {
      cause: error,
    });
  }
  if (width === undefined || height === undefined || width <= 0 || height <= 0) {
    throw new ShoalError(ErrorCode.INVALID_INPUT, `image (${format ?? 'unknown format'}) has no dimensions`);
  }
  if (width * height > limits.maxPixels) {
    throw new ShoalError(
      ErrorCode.INPUT_TOO_LARGE,
      `image of ${width}×${height} pixels exceeds the limit of ${limits.maxPixels} pixels`,
      { details: { width, height, maxPixels: limits.maxPixels } },
    );
  }
  try {
    const { data, info } = await sharp(bytes, { failOn: 'truncated', limitInputPixels: limits.maxPixels })
      .rotate()
      .flatten({ background: { r: 255, g: 255, b: 255 } })
      .toColourspace('srgb')
      .removeAlpha()
      .raw()
      .toBuffer({ resolveWithObject: true });
    if (info.channels !== 3) {
      throw new ShoalError(ErrorCode.INVALID_INPUT, `image decoded to ${info.channels} channels, expected RGB`);
    }
    return { data: new Uint8Array(data.buffer, data.byteOffset, data.length), width: info.width, height: info.height };
  } catch (error) {
    if (error instanceof ShoalError) throw error;
    throw new ShoalError(ErrorCode.INVALID_INPUT, `corrupt or truncated ${format ?? ''} image: ${String(error instanceof Error ? error.message : error)}`, {
      cause: error,
    });
  }
}
