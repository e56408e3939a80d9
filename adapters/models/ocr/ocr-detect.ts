import { growRect, insideQuad, minAreaRect, quadBounds, quadSize, rectCorners, type Point, type Quad } from './ocr-geometry.js';

/**
 * Text boxes from a DB (Differentiable Binarization) probability map, the way PaddleOCR's
 * DBPostProcess reads it: threshold the map, take each connected region, fit its minimum-area
 * rectangle, drop regions whose mean probability inside that rectangle is low, then grow
 * ("unclip") the rectangle, because DB is trained to predict a shrunk text kernel: the offset is
 * area × ratio / perimeter, the inverse of the shrink used for its labels. Pure; runs in the
 * model thread on the detector's output.
 */

export interface DbOptions {
  /** Map pixels above this probability are text. @default 0.3 */
  thresh: number;
  /** A region is kept when its mean probability inside its box reaches this. @default 0.6 */
  boxThresh: number;
  /** Growth of the shrunk kernel back to the text's extent. @default 1.5 */
  unclipRatio: number;
  /** Regions considered (largest first). @default 1000 */
  maxCandidates: number;
  /** Boxes whose short side is under this many map pixels are noise. @default 3 */
  minSize: number;
}

export const DEFAULT_DB_OPTIONS: Readonly<DbOptions> = Object.freeze({
  thresh: 0.3,
  boxThresh: 0.6,
  unclipRatio: 1.5,
  maxCandidates: 1000,
  minSize: 3,
});

export interface ProbabilityMap {
  data: Float32Array;
  width: number;
  height: number;
}

export interface DetectedBox {
  /** Corners clockwise from top-left, in the coordinates asked for (map or image pixels). */
  quad: Quad;
  /** Mean text probability inside the un-grown box. */
  score: number;
}

/** A connected region of text pixels: per covered row, its leftmost and rightmost pixel. */
interface Region {
  pixels: number;
  rowMin: number;
  left: Int32Array;
  right: Int32Array;
}

/**
 * 8-connected regions of `mask` (1 = text). The flood fill's queue ends up holding every pixel of
 * the region, from which the row extremes are taken: the hull of the row extremes is the hull of
 * the region, so later steps never touch the other pixels.
 */
export function textRegions(mask: Uint8Array, width: number, height: number): Region[] {
  const seen = new Uint8Array(mask.length);
  const queue = new Int32Array(mask.length);
  const regions: Region[] = [];
  for (let start = 0; start < mask.length; start++) {
    if (mask[start] !== 1 || seen[start] === 1) continue;
    seen[start] = 1;
    queue[0] = start;
    let head = 0;
    let tail = 1;
    let rowMin = height;
    let rowMax = -1;
    while (head < tail) {
      const index = queue[head++] ?? 0;
      const y = Math.floor(index / width);
      const x = index - y * width;
      if (y < rowMin) rowMin = y;
      if (y > rowMax) rowMax = y;
      for (let dy = -1; dy <= 1; dy++) {
        const ny = y + dy;
        if (ny < 0 || ny >= height) continue;
        for (let dx = -1; dx <= 1; dx++) {
          const nx = x + dx;
          if (nx < 0 || nx >= width || (dx === 0 && dy === 0)) continue;
          const next = ny * width + nx;
          if (mask[next] === 1 && seen[next] === 0) {
            seen[next] = 1;
            queue[tail++] = next;
          }
        }
      }
    }
    const rows = rowMax - rowMin + 1;
    const left = new Int32Array(rows).fill(width);
    const right = new Int32Array(rows).fill(-1);
    for (let i = 0; i < tail; i++) {
      const index = queue[i] ?? 0;
      const y = Math.floor(index / width);
      const x = index - y * width;
      const row = y - rowMin;
      if (x < (left[row] ?? width)) left[row] = x;
      if (x > (right[row] ?? -1)) right[row] = x;
    }
    regions.push({ pixels: tail, rowMin, left, right });
  }
  return regions;
}

function regionPoints(region: Region): Point[] {
  const points: Point[] = [];
  for (let row = 0; row < region.left.length; row++) {
    const left = region.left[row] ?? 0;
    const right = region.right[row] ?? 0;
    points.push([left, region.rowMin + row]);
    if (right !== left) points.push([right, region.rowMin + row]);
  }
  return points;
}

/** Mean of the map over the pixels whose centres lie inside the quad (PaddleOCR's "fast" box score). */
export function meanInside(map: ProbabilityMap, quad: Quad): number {
  const bounds = quadBounds(quad);
  const x0 = Math.max(0, Math.floor(bounds.left));
  const x1 = Math.min(map.width - 1, Math.ceil(bounds.right));
  const y0 = Math.max(0, Math.floor(bounds.top));
  const y1 = Math.min(map.height - 1, Math.ceil(bounds.bottom));
  let sum = 0;
  let count = 0;
  for (let y = y0; y <= y1; y++) {
    for (let x = x0; x <= x1; x++) {
      if (!insideQuad(quad, x, y)) continue;
      sum += map.data[y * map.width + x] ?? 0;
      count++;
    }
  }
  return count === 0 ? 0 : sum / count;
}

/** Text boxes in probability-map coordinates, in no particular order. */
export function detectBoxes(map: ProbabilityMap, options: DbOptions = DEFAULT_DB_OPTIONS): DetectedBox[] {
  const mask = new Uint8Array(map.width * map.height);
  for (let i = 0; i < mask.length; i++) mask[i] = (map.data[i] ?? 0) > options.thresh ? 1 : 0;
  const regions = textRegions(mask, map.width, map.height)
    .sort((a, b) => b.pixels - a.pixels)
    .slice(0, options.maxCandidates);
  const boxes: DetectedBox[] = [];
  for (const region of regions) {
    const rect = minAreaRect(regionPoints(region));
    if (Math.min(rect.width, rect.height) < options.minSize) continue;
    const score = meanInside(map, rectCorners(rect));
    if (score < options.boxThresh) continue;
    const area = rect.width * rect.height;
    const perimeter = 2 * (rect.width + rect.height);
    const grown = growRect(rect, (area * options.unclipRatio) / perimeter);
    if (Math.min(grown.width, grown.height) < options.minSize + 2) continue;
    boxes.push({ quad: rectCorners(grown), score });
  }
  return boxes;
}

export interface Scale {
  /** Map size the boxes were found in. */
  from: { width: number; height: number };
  /** Image size to express them in. */
  to: { width: number; height: number };
}

/**
 * Boxes mapped from the detector's resized input back onto the original image, clipped to it;
 * boxes that end up 3 pixels or less on a side (mostly cut off by the border) are dropped.
 */
export function scaleBoxes(boxes: readonly DetectedBox[], scale: Scale): DetectedBox[] {
  const sx = scale.to.width / scale.from.width;
  const sy = scale.to.height / scale.from.height;
  const clip = (value: number, max: number): number => Math.min(max, Math.max(0, value));
  const out: DetectedBox[] = [];
  for (const box of boxes) {
    const corners = box.quad.map((p): Point => [clip(p[0] * sx, scale.to.width), clip(p[1] * sy, scale.to.height)]);
    const quad: Quad = [corners[0] ?? [0, 0], corners[1] ?? [0, 0], corners[2] ?? [0, 0], corners[3] ?? [0, 0]];
    const size = quadSize(quad);
    if (size.width <= 3 || size.height <= 3) continue;
    out.push({ quad, score: box.score });
  }
  return out;
}
