import { describe, expect, it } from 'vitest';
import { cropOrigin, imagenetRecipe, ImageProcessorConfig, preprocessImage, recipeFromConfig, resizedSize, type ImagePreprocessing } from '../../../../adapters/models/image/image-preprocess.js';
import { cropRgb, Resample, resizeLikePillow } from '../../../../adapters/models/image/image-resample.js';
import { rgbPixels } from '../../../helpers/tiny-image-model.js';

/**
 * Preprocessing recipes from preprocessor_config.json, and the Pillow-compatible resampler's
 * properties. (Agreement with Pillow itself, to 2.4e-7 after normalization on a 320 × 480 → 224 × 336
 * bicubic downscale, is checked against the kit's reference tensors in test/conformance/clip.test.ts.)
 */

const noise = (width: number, height: number): { data: Uint8Array; width: number; height: number } => ({
  data: rgbPixels(width, height, (x, y) => [(x * 37 + y * 11) % 256, (x * x + 3 * y) % 256, (x * y * 7 + 5) % 256]),
  width,
  height,
});

function parse(config: Record<string, unknown>): ImagePreprocessing {
  return recipeFromConfig(ImageProcessorConfig.parse(config), imagenetRecipe(224));
}

describe('recipes from preprocessor_config.json', () => {
  it('CLIPImageProcessor: integer or shortest_edge size, center crop, CLIP mean/std', () => {
    const clip = { image_processor_type: 'CLIPImageProcessor', do_center_crop: true, crop_size: 224, size: 224, resample: 3, image_mean: [0.1, 0.2, 0.3], image_std: [0.5, 0.5, 0.5] };
    const recipe = parse(clip);
    expect(recipe).toMatchObject({ resize: { mode: 'shortest_edge', size: 224 }, crop: { width: 224, height: 224 }, resample: 3, cropRounding: 'floor', mean: [0.1, 0.2, 0.3] });
    expect(parse({ ...clip, size: { shortest_edge: 336 }, crop_size: { height: 336, width: 336 } })).toMatchObject({ resize: { mode: 'shortest_edge', size: 336 }, crop: { width: 336, height: 336 } });
  });

  it('ViT: {height, width} (or a bare integer) warps to that size without a crop', () => {
    const vit = { image_processor_type: 'ViTImageProcessor', size: { height: 384, width: 384 }, do_resize: true, resample: 2 };
    expect(parse(vit)).toMatchObject({ resize: { mode: 'exact', width: 384, height: 384 }, resample: 2 });
    expect(parse({ ...vit, size: 224, do_center_crop: false })).toMatchObject({ resize: { mode: 'exact', width: 224, height: 224 }, crop: null });
  });

  it('ConvNeXt crop_pct: below 384 resize to size / crop_pct then crop; from 384 warp', () => {
    expect(parse({ size: { shortest_edge: 224 }, crop_pct: 0.875 })).toMatchObject({ resize: { mode: 'shortest_edge', size: 256 }, crop: { width: 224, height: 224 } });
    expect(parse({ size: { shortest_edge: 384 }, crop_pct: 0.875 })).toMatchObject({ resize: { mode: 'exact', width: 384, height: 384 }, crop: null });
  });

  it('do_* false turns steps off; missing keys keep the family default', () => {
    const off = parse({ do_resize: false, do_center_crop: false, do_rescale: false, do_normalize: false });
    expect(off).toMatchObject({ resize: { mode: 'none' }, crop: null, rescale: null, mean: null, std: null });
    expect(parse({})).toMatchObject({ resize: imagenetRecipe(224).resize, mean: imagenetRecipe(224).mean, rescale: 1 / 255 });
    expect(parse({ image_mean: 0.5, image_std: 0.5 })).toMatchObject({ mean: [0.5, 0.5, 0.5], std: [0.5, 0.5, 0.5] });
  });
});

describe('geometry', () => {
  it('shortest edge: the long side is truncated, as transformers and torchvision do', () => {
    expect(resizedSize(320, 480, { mode: 'shortest_edge', size: 224 })).toEqual({ width: 224, height: 336 });
    expect(resizedSize(500, 375, { mode: 'shortest_edge', size: 256 })).toEqual({ width: 341, height: 256 });
    expect(resizedSize(500, 375, { mode: 'none' })).toEqual({ width: 500, height: 375 });
  });

  it('crop offsets: floor (transformers) or round half to even (torchvision)', () => {
    expect(cropOrigin(343, 224, 'floor')).toBe(59);
    expect(cropOrigin(343, 224, 'round')).toBe(60);
    expect(cropOrigin(341, 224, 'round')).toBe(58);
    expect(cropOrigin(336, 224, 'floor')).toBe(56);
  });
});

describe('resizeLikePillow', () => {
  it('keeps a constant picture constant, up and down, with every filter', () => {
    const flat = { data: rgbPixels(37, 23, () => [200, 13, 255]), width: 37, height: 23 };
    for (const filter of [Resample.BILINEAR, Resample.BICUBIC, Resample.LANCZOS, Resample.BOX, Resample.HAMMING, Resample.NEAREST]) {
      for (const [w, h] of [[11, 7], [80, 51]] as const) {
        const out = resizeLikePillow(flat, w, h, filter);
        expect(new Set(out.data.filter((_, i) => i % 3 === 0)), `filter ${filter} ${w}x${h}`).toEqual(new Set([200]));
        expect(new Set(out.data.filter((_, i) => i % 3 === 2))).toEqual(new Set([255]));
      }
    }
  });

  it('box ÷2 averages pairs in 8 bits per pass (rounding half up), like Pillow', () => {
    const image = noise(8, 6);
    const out = resizeLikePillow(image, 4, 3, Resample.BOX);
    const at = (x: number, y: number, c: number): number => image.data[(y * 8 + x) * 3 + c] ?? 0;
    for (let y = 0; y < 3; y++) {
      for (let x = 0; x < 4; x++) {
        for (let c = 0; c < 3; c++) {
          const top = Math.floor((at(2 * x, 2 * y, c) + at(2 * x + 1, 2 * y, c) + 1) / 2);
          const bottom = Math.floor((at(2 * x, 2 * y + 1, c) + at(2 * x + 1, 2 * y + 1, c) + 1) / 2);
          expect(out.data[(y * 4 + x) * 3 + c]).toBe(Math.floor((top + bottom + 1) / 2));
        }
      }
    }
  });

  it('computing only a crop window gives exactly the crop of the full resize', () => {
    const image = noise(97, 61);
    const window = { left: 9, top: 4, width: 20, height: 17 };
    for (const filter of [Resample.BILINEAR, Resample.BICUBIC, Resample.LANCZOS]) {
      expect(resizeLikePillow(image, 43, 27, filter, window)).toEqual(cropRgb(resizeLikePillow(image, 43, 27, filter), window));
    }
  });

  it('the same size is a copy', () => {
    const image = noise(5, 4);
    expect(resizeLikePillow(image, 5, 4, Resample.BICUBIC).data).toEqual(image.data);
  });
});

describe('preprocessImage', () => {
  const recipe: ImagePreprocessing = { ...imagenetRecipe(4), resize: { mode: 'none' }, crop: null };
  const image = noise(4, 3);

  it('CHW float32 of (x / 255 - mean) / std', () => {
    const { pixels, dims } = preprocessImage(image, recipe);
    expect(dims).toEqual([3, 3, 4]);
    const expected = Math.fround((Math.fround((image.data[3 * 5 + 1] ?? 0) / 255) - Math.fround(0.456)) / Math.fround(0.224));
    expect(pixels[1 * 12 + 5]).toBe(Math.fround(expected));
  });

  it('HWC layout and BGR order permute the same values; no rescale/normalize keeps 0..255', () => {
    const chw = preprocessImage(image, recipe).pixels;
    const hwc = preprocessImage(image, { ...recipe, layout: 'hwc', channelOrder: 'bgr' });
    expect(hwc.dims).toEqual([3, 4, 3]);
    // BGR: channel 0 of the tensor is blue (CHW channel 2).
    for (let i = 0; i < 12; i++) expect(hwc.pixels[i * 3]).toBe(chw[2 * 12 + i]);
    const raw = preprocessImage(image, { ...recipe, rescale: null, mean: null, std: null });
    expect(Array.from(raw.pixels.subarray(0, 12))).toEqual(Array.from({ length: 12 }, (_, i) => image.data[i * 3] ?? 0));
  });

  it('a crop larger than the picture pads with black, as transformers does', () => {
    const padded = preprocessImage(image, { ...recipe, crop: { width: 6, height: 3 }, rescale: null, mean: null, std: null });
    expect(padded.dims).toEqual([3, 3, 6]);
    expect(padded.pixels[0]).toBe(0);
    expect(padded.pixels[1]).toBe(image.data[0]);
  });
});
