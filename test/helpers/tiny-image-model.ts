import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import sharp from 'sharp';
import { z } from 'zod';
import { fixtureDir } from './tiny-model.js';

/**
 * The image fixtures' weights (image.json, written by test/fixtures/build/image-fixtures.ts) and
 * a plain-TypeScript forward pass of their image graphs, for images that need no resampling
 * (exactly the graph's 32 × 32 input) or are one solid colour (which every resampling keeps).
 */

const Triple = z.tuple([z.number(), z.number(), z.number()]);
const ImageWeights = z.strictObject({
  kind: z.enum(['patches', 'global']),
  size: z.number().int(),
  patch: z.number().int().optional(),
  mean: Triple,
  std: Triple,
  weights: z.array(z.array(z.number())),
  bias: z.array(z.number()),
});
export type ImageWeights = z.infer<typeof ImageWeights>;

export function loadImageWeights(name: string): ImageWeights {
  return ImageWeights.parse(JSON.parse(readFileSync(join(fixtureDir(name), 'image.json'), 'utf8')));
}

/** Interleaved RGB rows of `size` × `size` pixels, from a colour function of (x, y). */
export function rgbPixels(width: number, height: number, colour: (x: number, y: number) => readonly [number, number, number]): Uint8Array {
  const data = new Uint8Array(width * height * 3);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) data.set(colour(x, y), (y * width + x) * 3);
  }
  return data;
}

export async function png(width: number, height: number, colour: (x: number, y: number) => readonly [number, number, number]): Promise<Uint8Array> {
  const raw = Buffer.from(rgbPixels(width, height, colour));
  return new Uint8Array(await sharp(raw, { raw: { width, height, channels: 3 } }).png().toBuffer());
}

export const QUADRANTS: readonly (readonly [number, number, number])[] = [
  [230, 30, 40],
  [20, 200, 60],
  [30, 40, 220],
  [250, 250, 250],
];

/** A 32 × 32 picture with a different colour in each 16 × 16 quadrant (TL, TR, BL, BR). */
export function quadrant(x: number, y: number, size = 32): readonly [number, number, number] {
  const half = size / 2;
  return QUADRANTS[(y < half ? 0 : 2) + (x < half ? 0 : 1)] ?? [0, 0, 0];
}

/** The graph's features of an image already at the graph's size: patch or global channel means of normalized pixels. */
export function imageFeatures(weights: ImageWeights, pixels: Uint8Array): number[] {
  const size = weights.size;
  const patch = weights.kind === 'patches' ? (weights.patch ?? size) : size;
  const grid = size / patch;
  const features: number[] = [];
  for (let c = 0; c < 3; c++) {
    for (let py = 0; py < grid; py++) {
      for (let px = 0; px < grid; px++) {
        let sum = 0;
        for (let y = py * patch; y < (py + 1) * patch; y++) {
          for (let x = px * patch; x < (px + 1) * patch; x++) {
            sum += ((pixels[(y * size + x) * 3 + c] ?? 0) / 255 - (weights.mean[c] ?? 0)) / (weights.std[c] ?? 1);
          }
        }
        features.push(sum / (patch * patch));
      }
    }
  }
  return features;
}

/** features · W + b */
export function imageOutputs(weights: ImageWeights, pixels: Uint8Array): number[] {
  const features = imageFeatures(weights, pixels);
  return weights.bias.map((b, j) => features.reduce((sum, f, k) => sum + f * (weights.weights[k]?.[j] ?? 0), b));
}

/** The outputs for a solid colour (any picture size: resampling keeps a constant image constant). */
export function solidOutputs(weights: ImageWeights, rgb: readonly [number, number, number]): number[] {
  return imageOutputs(weights, rgbPixels(weights.size, weights.size, () => rgb));
}
