import sharp from 'sharp';
import { ErrorCode, ShoalError } from '../../protocol/errors.js';
import type { RgbImage } from '../image/image-decode.js';

/**
 * The text detector's input (prep thread): the page resized so its sides are multiples of 32
 * (the detector's feature pyramid halves the size five times) within a side-length limit, then
 * normalized with ImageNet statistics in PaddleOCR's BGR plane order.
 */

export interface DetectorSizeOptions {
  /** Side length the page is scaled to: its longer side down to it ('max') or its shorter side up to it ('min'). */
  limitSideLen: number;
  limitType: 'max' | 'min';
  /** Hard cap on the longer side whatever the limit says, so one huge page cannot exhaust memory. */
  maxSideLen: number;
}

const STRIDE = 32;

export function detectorSize(width: number, height: number, options: DetectorSizeOptions): { width: number; height: number } {
  let ratio = 1;
  if (options.limitType === 'max') {
    const longer = Math.max(width, height);
    if (longer > options.limitSideLen) ratio = options.limitSideLen / longer;
  } else {
    const shorter = Math.min(width, height);
    if (shorter < options.limitSideLen) ratio = options.limitSideLen / shorter;
  }
  const longer = Math.max(width, height) * ratio;
  if (longer > options.maxSideLen) ratio *= options.maxSideLen / longer;
  const round = (side: number): number => Math.max(STRIDE, Math.round((side * ratio) / STRIDE) * STRIDE);
  return { width: Math.min(round(width), options.maxSideLen), height: Math.min(round(height), options.maxSideLen) };
}

/** ImageNet mean and deviation, per plane in B, G, R order as PaddleOCR applies them. */
const MEAN = [0.485, 0.456, 0.406] as const;
const STD = [0.229, 0.224, 0.225] as const;

/** Interleaved RGB → [3, height, width] normalized BGR planes. */
export function detectorTensor(image: RgbImage): Float32Array {
  const plane = image.width * image.height;
  const out = new Float32Array(3 * plane);
  for (let i = 0; i < plane; i++) {
    const r = image.data[i * 3] ?? 0;
    const g = image.data[i * 3 + 1] ?? 0;
    const b = image.data[i * 3 + 2] ?? 0;
    out[i] = (b / 255 - MEAN[0]) / STD[0];
    out[plane + i] = (g / 255 - MEAN[1]) / STD[1];
    out[2 * plane + i] = (r / 255 - MEAN[2]) / STD[2];
  }
  return out;
}

/** Resamples an RGB image (linear filter, which averages when shrinking). */
export async function resizeRgb(image: RgbImage, width: number, height: number): Promise<RgbImage> {
  if (width === image.width && height === image.height) return image;
  try {
    const { data, info } = await sharp(image.data, { raw: { width: image.width, height: image.height, channels: 3 } })
      .resize(width, height, { fit: 'fill', kernel: 'linear' })
      .raw()
      .toBuffer({ resolveWithObject: true });
    return { data: new Uint8Array(data.buffer, data.byteOffset, data.length), width: info.width, height: info.height };
  } catch (error) {
    throw new ShoalError(ErrorCode.INTERNAL, `cannot resize a ${image.width}×${image.height} image for text detection: ${String(error)}`, {
      cause: error,
    });
  }
}
