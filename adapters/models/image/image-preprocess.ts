import { z } from 'zod';
import type { RgbImage } from './image-decode.js';
import { Resample, resizeLikePillow, toResample, type Window } from './image-resample.js';

/**
 * Image preprocessing driven by a model's preprocessor_config.json (CLIPImageProcessor, ViT,
 * ConvNeXt, BEiT... all share these keys), resolved once at detection into a plain
 * `ImagePreprocessing` recipe that travels in the profile, and applied in prep threads:
 *
 *   resize (Pillow-exact, see image-resample.ts) → center crop → rescale → normalize → CHW/HWC.
 *
 * Float rounding follows transformers/torchvision: the rescaled value is rounded to float32, and
 * (x − mean) / std is computed in float32 with float32 mean/std, so tensors match the Python
 * reference to ~1e-7 whenever the resized pixels match.
 */

const Size = z.union([
  z.number().int().positive(),
  z.looseObject({
    shortest_edge: z.number().int().positive().optional(),
    longest_edge: z.number().int().positive().optional(),
    height: z.number().int().positive().optional(),
    width: z.number().int().positive().optional(),
  }),
]);
const Triple = z.union([z.number(), z.array(z.number()).length(3)]);

/** The keys of preprocessor_config.json Shoal reads (others are ignored). */
export const ImageProcessorConfig = z.looseObject({
  image_processor_type: z.string().optional(),
  feature_extractor_type: z.string().optional(),
  do_resize: z.boolean().optional(),
  size: Size.optional(),
  resample: z.number().int().min(0).max(5).optional(),
  do_center_crop: z.boolean().optional(),
  crop_size: Size.optional(),
  /** ConvNeXt: resize the shortest edge to size / crop_pct, then crop to size. */
  crop_pct: z.number().positive().max(1).nullable().optional(),
  do_rescale: z.boolean().optional(),
  rescale_factor: z.number().positive().optional(),
  do_normalize: z.boolean().optional(),
  image_mean: Triple.optional(),
  image_std: Triple.optional(),
  do_convert_rgb: z.boolean().optional(),
});
export type ImageProcessorConfig = z.infer<typeof ImageProcessorConfig>;

const Side = z.number().int().positive().max(8192);
const Rgb = z.tuple([z.number(), z.number(), z.number()]);

/** A resolved recipe (profile options, overridable in the catalog as a whole). */
export const ImagePreprocessing = z.strictObject({
  /** `shortest_edge`: scale so the short side is `size` (long side truncated, as HF/torchvision do); `exact`: warp to width × height. */
  resize: z.discriminatedUnion('mode', [
    z.strictObject({ mode: z.literal('none') }),
    z.strictObject({ mode: z.literal('shortest_edge'), size: Side }),
    z.strictObject({ mode: z.literal('exact'), width: Side, height: Side }),
  ]),
  /** Pillow filter number (0 nearest, 1 lanczos, 2 bilinear, 3 bicubic, 4 box, 5 hamming). */
  resample: z.number().int().min(0).max(5),
  crop: z.strictObject({ width: Side, height: Side }).nullable(),
  /** Crop offset rule: `floor` (transformers) or `round` (torchvision CenterCrop, half to even). */
  cropRounding: z.enum(['floor', 'round']),
  /** Multiplier applied to 0..255 values (1/255); null keeps 0..255. */
  rescale: z.number().positive().nullable(),
  mean: Rgb.nullable(),
  std: Rgb.nullable(),
  channelOrder: z.enum(['rgb', 'bgr']),
  /** Tensor layout without the batch axis: `chw` (PyTorch exports) or `hwc` (TensorFlow exports). */
  layout: z.enum(['chw', 'hwc']),
});
export type ImagePreprocessing = z.infer<typeof ImagePreprocessing>;

export const IMAGENET_MEAN: [number, number, number] = [0.485, 0.456, 0.406];
export const IMAGENET_STD: [number, number, number] = [0.229, 0.224, 0.225];

/**
 * The ONNX model zoo / torchvision ImageNet recipe for a `side`-pixel input: Resize(side / 0.875)
 * (256 for 224) with Pillow bilinear, CenterCrop(side), ToTensor (/255), ImageNet mean/std.
 */
export function imagenetRecipe(side = 224): ImagePreprocessing {
  return {
    resize: { mode: 'shortest_edge', size: Math.floor(side / 0.875) },
    resample: Resample.BILINEAR,
    crop: { width: side, height: side },
    cropRounding: 'round',
    rescale: 1 / 255,
    mean: IMAGENET_MEAN,
    std: IMAGENET_STD,
    channelOrder: 'rgb',
    layout: 'chw',
  };
}

function triple(value: number | number[] | undefined, fallback: [number, number, number] | null): [number, number, number] | null {
  if (value === undefined) return fallback;
  if (typeof value === 'number') return [value, value, value];
  return [value[0] ?? 0, value[1] ?? 0, value[2] ?? 0];
}

function sizeOf(value: z.infer<typeof Size>, squareInt: boolean): ImagePreprocessing['resize'] {
  if (typeof value === 'number') return squareInt ? { mode: 'exact', width: value, height: value } : { mode: 'shortest_edge', size: value };
  if (value.shortest_edge !== undefined) return { mode: 'shortest_edge', size: value.shortest_edge };
  if (value.height !== undefined && value.width !== undefined) return { mode: 'exact', width: value.width, height: value.height };
  if (value.longest_edge !== undefined) return { mode: 'exact', width: value.longest_edge, height: value.longest_edge };
  return { mode: 'none' };
}

function cropOf(value: z.infer<typeof Size>): { width: number; height: number } | null {
  if (typeof value === 'number') return { width: value, height: value };
  if (value.height !== undefined && value.width !== undefined) return { width: value.width, height: value.height };
  const side = value.shortest_edge ?? value.longest_edge;
  return side === undefined ? null : { width: side, height: side };
}

/**
 * preprocessor_config.json → recipe. Keys the file leaves out keep `fallback`'s values (the
 * family's convention: CLIP's for CLIP, the ImageNet recipe for classifiers), except that an
 * explicit `do_*: false` turns a step off.
 */
export function recipeFromConfig(config: ImageProcessorConfig, fallback: ImagePreprocessing): ImagePreprocessing {
  const clipLike = /clip/i.test(`${config.image_processor_type ?? ''} ${config.feature_extractor_type ?? ''}`);
  // An integer `size` means the shortest edge for CLIP-style processors (and whenever a crop
  // follows), and a square for ViT-style ones, as transformers' get_size_dict decides.
  const squareInt = !clipLike && config.do_center_crop !== true;
  let resize = config.size === undefined ? fallback.resize : sizeOf(config.size, squareInt);
  let crop = config.crop_size === undefined ? fallback.crop : cropOf(config.crop_size);
  if (config.do_center_crop === false) crop = null;
  if (config.crop_pct !== undefined && config.crop_pct !== null && resize.mode === 'shortest_edge') {
    // ConvNeXt: below 384 px, resize to size / crop_pct and crop size × size; above, warp to size × size.
    const side = resize.size;
    if (side < 384) {
      crop = { width: side, height: side };
      resize = { mode: 'shortest_edge', size: Math.trunc(side / config.crop_pct) };
    } else {
      crop = null;
      resize = { mode: 'exact', width: side, height: side };
    }
  }
  if (config.do_resize === false) resize = { mode: 'none' };
  const rescale = config.do_rescale === false ? null : (config.rescale_factor ?? fallback.rescale ?? 1 / 255);
  const normalize = config.do_normalize !== false;
  return {
    resize,
    resample: config.resample ?? fallback.resample,
    crop,
    // A preprocessor_config.json means a transformers processor, which floors the crop offset.
    cropRounding: 'floor',
    rescale,
    mean: normalize ? triple(config.image_mean, fallback.mean) : null,
    std: normalize ? triple(config.image_std, fallback.std) : null,
    channelOrder: fallback.channelOrder,
    layout: fallback.layout,
  };
}

/** Width × height after the resize step. */
export function resizedSize(width: number, height: number, resize: ImagePreprocessing['resize']): { width: number; height: number } {
  switch (resize.mode) {
    case 'none':
      return { width, height };
    case 'exact':
      return { width: resize.width, height: resize.height };
    case 'shortest_edge': {
      // int(size * long / short), the truncation transformers and torchvision both use.
      if (width <= height) return { width: resize.size, height: Math.trunc((resize.size * height) / width) };
      return { width: Math.trunc((resize.size * width) / height), height: resize.size };
    }
  }
}

function roundHalfEven(x: number): number {
  const r = Math.round(x);
  return Math.abs(x % 1) === 0.5 && r % 2 !== 0 ? r - 1 : r;
}

/** Top-left of a centered crop (may be negative when the crop is larger: the outside is zero-padded). */
export function cropOrigin(size: number, crop: number, rounding: ImagePreprocessing['cropRounding']): number {
  return rounding === 'floor' ? Math.floor((size - crop) / 2) : roundHalfEven((size - crop) / 2);
}

/** The final pixel size of a recipe's tensor (crop, else exact resize), or null when it depends on the image. */
export function outputSize(recipe: ImagePreprocessing): { width: number; height: number } | null {
  if (recipe.crop !== null) return recipe.crop;
  if (recipe.resize.mode === 'exact') return { width: recipe.resize.width, height: recipe.resize.height };
  return null;
}

/** Copies a window that may reach outside the image; the outside is black (transformers pads crops with 0). */
function paddedWindow(image: RgbImage, window: Window): RgbImage {
  const out = new Uint8Array(window.width * window.height * 3);
  for (let y = 0; y < window.height; y++) {
    const sy = y + window.top;
    if (sy < 0 || sy >= image.height) continue;
    for (let x = 0; x < window.width; x++) {
      const sx = x + window.left;
      if (sx < 0 || sx >= image.width) continue;
      const from = (sy * image.width + sx) * 3;
      out.set(image.data.subarray(from, from + 3), (y * window.width + x) * 3);
    }
  }
  return { data: out, width: window.width, height: window.height };
}

/** Resize + crop: only the cropped pixels are resampled. */
export function resizeAndCrop(image: RgbImage, recipe: ImagePreprocessing): RgbImage {
  const resized = resizedSize(image.width, image.height, recipe.resize);
  const crop = recipe.crop ?? resized;
  const window: Window = {
    left: cropOrigin(resized.width, crop.width, recipe.cropRounding),
    top: cropOrigin(resized.height, crop.height, recipe.cropRounding),
    width: crop.width,
    height: crop.height,
  };
  const inside = window.left >= 0 && window.top >= 0 && window.left + window.width <= resized.width && window.top + window.height <= resized.height;
  const resample = toResample(recipe.resample);
  if (inside) return resizeLikePillow(image, resized.width, resized.height, resample, window);
  return paddedWindow(resizeLikePillow(image, resized.width, resized.height, resample), window);
}

/** The recipe's float32 tensor of an image (without the batch axis) and its dims. */
export function preprocessImage(image: RgbImage, recipe: ImagePreprocessing): { pixels: Float32Array; dims: number[] } {
  const cropped = resizeAndCrop(image, recipe);
  const { width, height, data } = cropped;
  const plane = width * height;
  const scale = recipe.rescale;
  const channels = recipe.channelOrder === 'rgb' ? [0, 1, 2] : [2, 1, 0];
  // Per channel and per 0..255 value the result is fixed: a 256-entry table per channel.
  const tables = channels.map((source, c) => {
    const mean = Math.fround(recipe.mean?.[source] ?? 0);
    const std = Math.fround(recipe.std?.[source] ?? 1);
    const table = new Float32Array(256);
    for (let v = 0; v < 256; v++) {
      const x = scale === null ? v : Math.fround(v * scale);
      table[v] = recipe.mean === null ? x : Math.fround(Math.fround(x - mean) / std);
    }
    return { source, table, c };
  });
  const pixels = new Float32Array(plane * 3);
  for (const { source, table, c } of tables) {
    for (let i = 0; i < plane; i++) {
      const value = table[data[i * 3 + source] ?? 0] ?? 0;
      if (recipe.layout === 'chw') pixels[c * plane + i] = value;
      else pixels[i * 3 + c] = value;
    }
  }
  return { pixels, dims: recipe.layout === 'chw' ? [3, height, width] : [height, width, 3] };
}
