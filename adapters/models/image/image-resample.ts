import { ErrorCode, ShoalError } from '../../protocol/errors.js';
import type { RgbImage } from './image-decode.js';

/**
 * Resizing of 8-bit RGB images the way Pillow's `Image.resize` does it, because that is what the
 * Hugging Face image processors and torchvision's PIL transforms feed the models they were trained
 * with. libvips (sharp) uses other kernels and no antialiasing support widening, which moves a
 * downscaled CLIP embedding by up to 0.025; this file reproduces Pillow's ImagingResample instead:
 *
 * - separable convolution, horizontal pass first, then vertical;
 * - the filter's support is widened by the downscale factor (antialiasing), and each output pixel's
 *   weights are normalized to sum to 1;
 * - 8-bit images are resampled in fixed point: each weight is rounded to a multiple of 2^-22
 *   (away from zero), sums start at 2^21 (round half up) and the result is shifted down and clamped
 *   to 0..255 — after EACH pass, so the intermediate image is 8-bit too. Doing the passes in
 *   floating point instead differs from Pillow by up to one grey level per pass.
 *
 * Only the pixels inside `window` are computed (a resize followed by a center crop needs no
 * more): every output pixel depends only on its own coefficients, so this is exact.
 */

/** Pillow's resampling filters, numbered as in `PIL.Image.Resampling` (and preprocessor_config.json `resample`). */
export const Resample = {
  NEAREST: 0,
  LANCZOS: 1,
  BILINEAR: 2,
  BICUBIC: 3,
  BOX: 4,
  HAMMING: 5,
} as const;
export type Resample = (typeof Resample)[keyof typeof Resample];

/** A preprocessor_config.json `resample` number as a filter (validated 0..5 by the recipe schema). */
export function toResample(value: number): Resample {
  switch (value) {
    case 0:
      return Resample.NEAREST;
    case 1:
      return Resample.LANCZOS;
    case 2:
      return Resample.BILINEAR;
    case 3:
      return Resample.BICUBIC;
    case 4:
      return Resample.BOX;
    case 5:
      return Resample.HAMMING;
    default:
      throw new ShoalError(ErrorCode.CONFIG_INVALID, `resample ${value} is not a Pillow filter (0 nearest, 1 lanczos, 2 bilinear, 3 bicubic, 4 box, 5 hamming)`);
  }
}

interface Filter {
  support: number;
  weight(x: number): number;
}

function sinc(x: number): number {
  if (x === 0) return 1;
  const px = x * Math.PI;
  return Math.sin(px) / px;
}

const FILTERS: Readonly<Record<Exclude<Resample, 0>, Filter>> = {
  [Resample.BOX]: { support: 0.5, weight: (x) => (x > -0.5 && x <= 0.5 ? 1 : 0) },
  [Resample.BILINEAR]: {
    support: 1,
    weight: (x) => {
      const a = Math.abs(x);
      return a < 1 ? 1 - a : 0;
    },
  },
  [Resample.HAMMING]: {
    support: 1,
    weight: (x) => {
      const a = Math.abs(x);
      if (a === 0) return 1;
      if (a >= 1) return 0;
      const px = a * Math.PI;
      return (Math.sin(px) / px) * (0.54 + 0.46 * Math.cos(px));
    },
  },
  // Keys' cubic convolution with a = -0.5 (Pillow's choice; libvips and OpenCV use other values).
  [Resample.BICUBIC]: {
    support: 2,
    weight: (x) => {
      const a = -0.5;
      const t = Math.abs(x);
      if (t < 1) return ((a + 2) * t - (a + 3)) * t * t + 1;
      if (t < 2) return (((t - 5) * t + 8) * t - 4) * a;
      return 0;
    },
  },
  [Resample.LANCZOS]: { support: 3, weight: (x) => (x > -3 && x < 3 ? sinc(x) * sinc(x / 3) : 0) },
};

const PRECISION_BITS = 32 - 8 - 2;
const ONE = 1 << PRECISION_BITS;
const HALF = 1 << (PRECISION_BITS - 1);

/** Per output index: first input index, tap count, and fixed-point weights (`taps` wide rows). */
interface Coefficients {
  start: Int32Array;
  count: Int32Array;
  taps: number;
  weights: Int32Array;
}

function coefficients(inSize: number, outSize: number, filter: Filter): Coefficients {
  const scale = inSize / outSize;
  const filterScale = Math.max(scale, 1);
  const support = filter.support * filterScale;
  const taps = Math.ceil(support) * 2 + 1;
  const start = new Int32Array(outSize);
  const count = new Int32Array(outSize);
  const weights = new Int32Array(outSize * taps);
  const row = new Float64Array(taps);
  // Pillow multiplies by the reciprocal (not divides): kept so the rounded weights match bit for bit.
  const inverse = 1 / filterScale;
  for (let out = 0; out < outSize; out++) {
    const center = (out + 0.5) * scale;
    // Pillow truncates after adding 0.5 (a C cast), which is floor for these non-negative values.
    const first = Math.max(Math.trunc(center - support + 0.5), 0);
    const last = Math.min(Math.trunc(center + support + 0.5), inSize);
    const n = last - first;
    let total = 0;
    for (let k = 0; k < n; k++) {
      const w = filter.weight((k + first - center + 0.5) * inverse);
      row[k] = w;
      total += w;
    }
    for (let k = 0; k < n; k++) {
      const w = total === 0 ? row[k] ?? 0 : (row[k] ?? 0) / total;
      weights[out * taps + k] = w < 0 ? Math.trunc(-0.5 + w * ONE) : Math.trunc(0.5 + w * ONE);
    }
    start[out] = first;
    count[out] = n;
  }
  return { start, count, taps, weights };
}

function clip8(sum: number): number {
  // Arithmetic shift floors negative sums, as Pillow's `in >> PRECISION_BITS` does.
  const v = sum >> PRECISION_BITS;
  return v < 0 ? 0 : v > 255 ? 255 : v;
}

/** A rectangle of the resized image: [left, left + width) × [top, top + height). */
export interface Window {
  left: number;
  top: number;
  width: number;
  height: number;
}

function nearest(image: RgbImage, outWidth: number, outHeight: number, window: Window): RgbImage {
  const out = new Uint8Array(window.width * window.height * 3);
  const sx = image.width / outWidth;
  const sy = image.height / outHeight;
  for (let y = 0; y < window.height; y++) {
    const iy = Math.min(Math.floor((y + window.top + 0.5) * sy), image.height - 1);
    for (let x = 0; x < window.width; x++) {
      const ix = Math.min(Math.floor((x + window.left + 0.5) * sx), image.width - 1);
      const from = (iy * image.width + ix) * 3;
      const to = (y * window.width + x) * 3;
      out[to] = image.data[from] ?? 0;
      out[to + 1] = image.data[from + 1] ?? 0;
      out[to + 2] = image.data[from + 2] ?? 0;
    }
  }
  return { data: out, width: window.width, height: window.height };
}

/**
 * Resizes `image` to outWidth × outHeight with Pillow's algorithm and returns the `window` of the
 * result (the whole image when absent).
 */
export function resizeLikePillow(
  image: RgbImage,
  outWidth: number,
  outHeight: number,
  resample: Resample,
  window: Window = { left: 0, top: 0, width: outWidth, height: outHeight },
): RgbImage {
  if (outWidth < 1 || outHeight < 1) throw new ShoalError(ErrorCode.INVALID_INPUT, `cannot resize an image to ${outWidth}×${outHeight}`);
  if (window.left < 0 || window.top < 0 || window.left + window.width > outWidth || window.top + window.height > outHeight) {
    throw new ShoalError(ErrorCode.INTERNAL, `crop window ${JSON.stringify(window)} is outside the ${outWidth}×${outHeight} image`);
  }
  if (outWidth === image.width && outHeight === image.height) return cropRgb(image, window);
  if (resample === Resample.NEAREST) return nearest(image, outWidth, outHeight, window);
  const filter = FILTERS[resample];
  const horizontal = coefficients(image.width, outWidth, filter);
  const vertical = coefficients(image.height, outHeight, filter);

  // Source rows the window's output rows read: only those go through the horizontal pass.
  const rowFirst = vertical.start[window.top] ?? 0;
  const lastRow = window.top + window.height - 1;
  const rowEnd = (vertical.start[lastRow] ?? 0) + (vertical.count[lastRow] ?? 0);
  const needHorizontal = outWidth !== image.width;
  const needVertical = outHeight !== image.height;

  // Pass 1 (horizontal): rows rowFirst..rowEnd of the source → window columns, 8-bit.
  const rows = rowEnd - rowFirst;
  const mid = new Uint8Array(rows * window.width * 3);
  for (let r = 0; r < rows; r++) {
    const src = (r + rowFirst) * image.width * 3;
    for (let x = 0; x < window.width; x++) {
      const to = (r * window.width + x) * 3;
      if (!needHorizontal) {
        const from = src + (x + window.left) * 3;
        mid[to] = image.data[from] ?? 0;
        mid[to + 1] = image.data[from + 1] ?? 0;
        mid[to + 2] = image.data[from + 2] ?? 0;
        continue;
      }
      const ox = x + window.left;
      const first = horizontal.start[ox] ?? 0;
      const n = horizontal.count[ox] ?? 0;
      const k0 = ox * horizontal.taps;
      let s0 = HALF;
      let s1 = HALF;
      let s2 = HALF;
      for (let k = 0; k < n; k++) {
        const w = horizontal.weights[k0 + k] ?? 0;
        const from = src + (first + k) * 3;
        s0 += (image.data[from] ?? 0) * w;
        s1 += (image.data[from + 1] ?? 0) * w;
        s2 += (image.data[from + 2] ?? 0) * w;
      }
      mid[to] = clip8(s0);
      mid[to + 1] = clip8(s1);
      mid[to + 2] = clip8(s2);
    }
  }

  // Pass 2 (vertical): window rows from the intermediate rows, 8-bit.
  const out = new Uint8Array(window.width * window.height * 3);
  const stride = window.width * 3;
  for (let y = 0; y < window.height; y++) {
    const oy = y + window.top;
    if (!needVertical) {
      out.set(mid.subarray((oy - rowFirst) * stride, (oy - rowFirst + 1) * stride), y * stride);
      continue;
    }
    const first = (vertical.start[oy] ?? 0) - rowFirst;
    const n = vertical.count[oy] ?? 0;
    const k0 = oy * vertical.taps;
    for (let c = 0; c < stride; c++) {
      let s = HALF;
      for (let k = 0; k < n; k++) s += (mid[(first + k) * stride + c] ?? 0) * (vertical.weights[k0 + k] ?? 0);
      out[y * stride + c] = clip8(s);
    }
  }
  return { data: out, width: window.width, height: window.height };
}

/** The `window` of an image, copied. */
export function cropRgb(image: RgbImage, window: Window): RgbImage {
  if (window.left === 0 && window.top === 0 && window.width === image.width && window.height === image.height) return image;
  const out = new Uint8Array(window.width * window.height * 3);
  const stride = window.width * 3;
  for (let y = 0; y < window.height; y++) {
    const from = ((y + window.top) * image.width + window.left) * 3;
    out.set(image.data.subarray(from, from + stride), y * stride);
  }
  return { data: out, width: window.width, height: window.height };
}
