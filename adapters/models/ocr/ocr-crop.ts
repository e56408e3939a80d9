import { quadSize, type Point, type Quad } from './ocr-geometry.js';

/**
 * Cutting text boxes out of a page for the recognizer (pure): each quadrilateral is warped by the
 * projective map that sends it onto an upright strip of a fixed height, sampling the page
 * bilinearly (edges replicated), in one resampling step from the original pixels. Strips become
 * the recognizer's NCHW input in PaddleOCR's convention: BGR planes scaled to [-1, 1], padded on
 * the right with zeros.
 */

export interface RgbPixels {
  /** Interleaved RGB, row-major. */
  data: Uint8Array;
  width: number;
  height: number;
}

/** Projective map of the unit square onto a quad: (0,0)→tl, (1,0)→tr, (1,1)→br, (0,1)→bl. */
interface Homography {
  a: number;
  b: number;
  c: number;
  d: number;
  e: number;
  f: number;
  g: number;
  h: number;
}

export function squareToQuad(quad: Quad): Homography {
  const [[x0, y0], [x1, y1], [x2, y2], [x3, y3]] = quad;
  const sx = x0 - x1 + x2 - x3;
  const sy = y0 - y1 + y2 - y3;
  let g = 0;
  let h = 0;
  if (Math.abs(sx) > 1e-9 || Math.abs(sy) > 1e-9) {
    const dx1 = x1 - x2;
    const dx2 = x3 - x2;
    const dy1 = y1 - y2;
    const dy2 = y3 - y2;
    const det = dx1 * dy2 - dx2 * dy1;
    // A degenerate (self-crossing or flat) quad has no projective map: sample it as a parallelogram.
    if (Math.abs(det) > 1e-9) {
      g = (sx * dy2 - dx2 * sy) / det;
      h = (dx1 * sy - sx * dy1) / det;
    }
  }
  return {
    a: x1 - x0 + g * x1,
    b: x3 - x0 + h * x3,
    c: x0,
    d: y1 - y0 + g * y1,
    e: y3 - y0 + h * y3,
    f: y0,
    g,
    h,
  };
}

export function mapPoint(m: Homography, u: number, v: number): Point {
  const w = m.g * u + m.h * v + 1;
  return [(m.a * u + m.b * v + m.c) / w, (m.d * u + m.e * v + m.f) / w];
}

/** Corners relabelled so the crop comes out turned by quarter turns counter-clockwise (2: upside down). */
export function turnQuad(quad: Quad, quarterTurns: 1 | 2 | 3): Quad {
  const [tl, tr, br, bl] = quad;
  if (quarterTurns === 1) return [tr, br, bl, tl];
  if (quarterTurns === 2) return [br, bl, tl, tr];
  return [bl, tl, tr, br];
}

/**
 * Reading orientation of a box: a box much taller than wide holds a vertical line, read after a
 * quarter turn (PaddleOCR turns crops with height ≥ 1.5 × width the same way).
 */
export function uprightQuad(quad: Quad): Quad {
  const size = quadSize(quad);
  return size.height >= 1.5 * size.width ? turnQuad(quad, 1) : quad;
}

/** Strip width for a quad at `height` pixels high, keeping its aspect ratio (widened `stretch` times), within [1, maxWidth]. */
export function stripWidth(quad: Quad, height: number, maxWidth: number, stretch = 1): number {
  const size = quadSize(quad);
  const ratio = size.width / Math.max(size.height, 1e-6);
  return Math.max(1, Math.min(maxWidth, Math.ceil(height * ratio * stretch)));
}

/** Warps `quad` of `image` onto a width × height RGB strip. */
export function cropStrip(image: RgbPixels, quad: Quad, width: number, height: number): RgbPixels {
  const map = squareToQuad(quad);
  const out = new Uint8Array(width * height * 3);
  const maxX = image.width - 1;
  const maxY = image.height - 1;
  const src = image.data;
  for (let row = 0; row < height; row++) {
    const v = (row + 0.5) / height;
    // mapPoint inlined: this loop runs for every pixel of every strip of a page.
    const rowX = map.b * v + map.c;
    const rowY = map.e * v + map.f;
    const rowW = map.h * v + 1;
    for (let col = 0; col < width; col++) {
      const u = (col + 0.5) / width;
      const w = map.g * u + rowW;
      const px = (map.a * u + rowX) / w;
      const py = (map.d * u + rowY) / w;
      // Quad coordinates measure from the image's top-left edge; pixel centres sit at +0.5.
      const x = Math.min(maxX, Math.max(0, px - 0.5));
      const y = Math.min(maxY, Math.max(0, py - 0.5));
      const x0 = Math.floor(x);
      const y0 = Math.floor(y);
      const x1 = Math.min(maxX, x0 + 1);
      const y1 = Math.min(maxY, y0 + 1);
      const fx = x - x0;
      const fy = y - y0;
      const i00 = (y0 * image.width + x0) * 3;
      const i01 = (y0 * image.width + x1) * 3;
      const i10 = (y1 * image.width + x0) * 3;
      const i11 = (y1 * image.width + x1) * 3;
      const o = (row * width + col) * 3;
      for (let c = 0; c < 3; c++) {
        const top = (src[i00 + c] ?? 0) * (1 - fx) + (src[i01 + c] ?? 0) * fx;
        const bottom = (src[i10 + c] ?? 0) * (1 - fx) + (src[i11 + c] ?? 0) * fx;
        out[o + c] = Math.round(top * (1 - fy) + bottom * fy);
      }
    }
  }
  return { data: out, width, height };
}

/**
 * Strips as one [n, 3, height, paddedWidth] float tensor: BGR planes (PaddleOCR models are trained
 * on OpenCV's channel order), values (p / 255 − 0.5) / 0.5, zero to the right of each strip.
 */
export function stripsTensor(strips: readonly RgbPixels[], height: number, paddedWidth: number): Float32Array {
  const plane = height * paddedWidth;
  const out = new Float32Array(strips.length * 3 * plane);
  strips.forEach((strip, n) => {
    const base = n * 3 * plane;
    const width = Math.min(strip.width, paddedWidth);
    for (let y = 0; y < Math.min(strip.height, height); y++) {
      for (let x = 0; x < width; x++) {
        const s = (y * strip.width + x) * 3;
        const o = y * paddedWidth + x;
        out[base + o] = (strip.data[s + 2] ?? 0) / 127.5 - 1;
        out[base + plane + o] = (strip.data[s + 1] ?? 0) / 127.5 - 1;
        out[base + 2 * plane + o] = (strip.data[s] ?? 0) / 127.5 - 1;
      }
    }
  });
  return out;
}

/** The strip turned upside down (a half turn is the pixel order reversed). */
export function turnStrip(strip: RgbPixels): RgbPixels {
  const pixels = strip.width * strip.height;
  const out = new Uint8Array(strip.data.length);
  for (let i = 0; i < pixels; i++) {
    const from = i * 3;
    const to = (pixels - 1 - i) * 3;
    out[to] = strip.data[from] ?? 0;
    out[to + 1] = strip.data[from + 1] ?? 0;
    out[to + 2] = strip.data[from + 2] ?? 0;
  }
  return { data: out, width: strip.width, height: strip.height };
}

/**
 * Up to `count` windows `width` pixels wide, spread evenly from the strip's left to its right
 * end (a strip no wider than one window is its own window).
 */
export function stripWindows(strip: RgbPixels, width: number, count: number): RgbPixels[] {
  if (strip.width <= width) return [strip];
  const n = Math.max(1, Math.min(count, Math.ceil(strip.width / width)));
  const windows: RgbPixels[] = [];
  for (let k = 0; k < n; k++) {
    const left = n === 1 ? 0 : Math.round((k * (strip.width - width)) / (n - 1));
    const data = new Uint8Array(width * strip.height * 3);
    for (let y = 0; y < strip.height; y++) {
      const from = (y * strip.width + left) * 3;
      data.set(strip.data.subarray(from, from + width * 3), y * width * 3);
    }
    windows.push({ data, width, height: strip.height });
  }
  return windows;
}

/**
 * The quad with a margin of `share` × its height added on every side, along its own edges: the
 * recognizer reads spaces and edge characters better with some background around the glyphs than
 * in DB's tight boxes.
 */
export function padQuad(quad: Quad, share: number): Quad {
  if (share <= 0) return quad;
  const margin = quadSize(quad).height * share;
  const [tl, tr, br, bl] = quad;
  const unit = (from: Point, to: Point): Point => {
    const length = Math.hypot(to[0] - from[0], to[1] - from[1]) || 1;
    return [(to[0] - from[0]) / length, (to[1] - from[1]) / length];
  };
  // Outward directions at each corner: away from its horizontal and its vertical neighbour.
  const move = (corner: Point, across: Point, down: Point): Point => {
    const a = unit(across, corner);
    const d = unit(down, corner);
    return [corner[0] + (a[0] + d[0]) * margin, corner[1] + (a[1] + d[1]) * margin];
  };
  return [move(tl, tr, bl), move(tr, tl, br), move(br, bl, tr), move(bl, br, tl)];
}
