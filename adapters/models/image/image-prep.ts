import { ErrorCode, ShoalError } from '../../protocol/errors.js';
import { imageItemError } from '../../protocol/item-errors.js';
import { ImagePolicy } from '../../sources/image-input.js';
import type { PrepContext, PreparedImage, PrepItem } from '../family.js';
import { decodeRgb } from './image-decode.js';
import { preprocessImage, type ImagePreprocessing } from './image-preprocess.js';

/**
 * The prep-thread work of one image item, shared by the image families: read the bytes (within the
 * policy's byte cap), decode to RGB (pixel cap checked from the header), preprocess with the
 * model's recipe. Errors name the item, so a caller sending 500 images knows which one to fix.
 */

const DEFAULT_MAX_PIXELS = ImagePolicy.parse({}).maxPixels;

export async function prepareImage(context: PrepContext, item: PrepItem, index: number, recipe: ImagePreprocessing, cost: number): Promise<PreparedImage> {
  if (item.image === undefined) {
    throw new ShoalError(ErrorCode.INTERNAL, `item ${index} is not an image`);
  }
  try {
    const bytes = await context.readImage(item.image);
    const rgb = await decodeRgb(bytes, { maxPixels: context.maxImagePixels ?? DEFAULT_MAX_PIXELS });
    const { pixels, dims } = preprocessImage(rgb, recipe);
    return { kind: 'image', pixels, dims, width: rgb.width, height: rgb.height, cost, role: item.role };
  } catch (error) {
    throw imageItemError(error instanceof ShoalError ? error : new ShoalError(ErrorCode.INVALID_INPUT, error instanceof Error ? error.message : String(error), { cause: error }), index);
  }
}
