import { describe, expect, it } from 'vitest';
import { detectBoxes, meanInside, scaleBoxes, textRegions, type ProbabilityMap } from '../../../../adapters/models/ocr/ocr-detect.js';
import { quadSize, type Quad } from '../../../../adapters/models/ocr/ocr-geometry.js';

/**
 * DB post-processing on hand-drawn probability maps, with the expected boxes worked out by hand:
 * a region's minimum-area rectangle around its pixel centres, grown on every side by
 * area × 1.5 / perimeter (PaddleOCR's unclip of a rectangle).
 */

function blankMap(width: number, height: number): ProbabilityMap {
  return { data: new Float32Array(width * height), width, height };
}

function fillRect(map: ProbabilityMap, x0: number, y0: number, x1: number, y1: number, value: number): void {
  for (let y = y0; y <= y1; y++) for (let x = x0; x <= x1; x++) map.data[y * map.width + x] = value;
}

/** Pixels whose centres fall in a rectangle of w × h centred at (cx, cy), turned by `degrees`. */
function fillRotated(map: ProbabilityMap, cx: number, cy: number, w: number, h: number, degrees: number, value: number): void {
  const a = (degrees * Math.PI) / 180;
  for (let y = 0; y < map.height; y++) {
    for (let x = 0; x < map.width; x++) {
      const u = (x - cx) * Math.cos(a) + (y - cy) * Math.sin(a);
      const v = -(x - cx) * Math.sin(a) + (y - cy) * Math.cos(a);
      if (Math.abs(u) <= w / 2 && Math.abs(v) <= h / 2) map.data[y * map.width + x] = value;
    }
  }
}

function expectQuad(actual: Quad, expected: [number, number][], digits = 3): void {
  actual.forEach((point, i) => {
    expect(point[0]).toBeCloseTo(expected[i]?.[0] ?? NaN, digits);
    expect(point[1]).toBeCloseTo(expected[i]?.[1] ?? NaN, digits);
  });
}

describe('text regions', () => {
  it('joins 8-connected pixels and keeps separate blobs apart', () => {
    const mask = new Uint8Array([
      1, 0, 0, 0, 1,
      0, 1, 0, 0, 1,
      0, 0, 0, 0, 0,
      1, 1, 0, 0, 0,
    ]);
    const regions = textRegions(mask, 5, 4);
    expect(regions.map((r) => r.pixels).sort()).toEqual([2, 2, 2]);
    const diagonal = regions.find((r) => r.rowMin === 0 && r.left[0] === 0);
    expect(diagonal && Array.from(diagonal.left)).toEqual([0, 1]);
  });
});

describe('DB boxes', () => {
  it('finds an axis-aligned line and grows it by area × 1.5 / perimeter', () => {
    const map = blankMap(100, 60);
    fillRect(map, 10, 20, 49, 27, 0.9);
    const [box, ...rest] = detectBoxes(map);
    expect(rest).toHaveLength(0);
    // Pixel centres 10..49 × 20..27: a 39 × 7 rectangle centred at (29.5, 23.5).
    const grow = (39 * 7 * 1.5) / (2 * (39 + 7));
    expect(box?.score).toBeCloseTo(0.9, 6);
    expectQuad(box?.quad ?? [[0, 0], [0, 0], [0, 0], [0, 0]], [
      [10 - grow, 20 - grow],
      [49 + grow, 20 - grow],
      [49 + grow, 27 + grow],
      [10 - grow, 27 + grow],
    ]);
  });

  it('drops regions below the box threshold and specks below the minimum size', () => {
    const map = blankMap(100, 60);
    fillRect(map, 10, 5, 60, 12, 0.5); // above thresh 0.3, below boxThresh 0.6
    fillRect(map, 80, 40, 81, 41, 0.95); // 2 × 2 speck: short side 1 < 3
    fillRect(map, 10, 30, 60, 38, 0.8);
    const boxes = detectBoxes(map);
    expect(boxes).toHaveLength(1);
    expect(boxes[0]?.score).toBeCloseTo(0.8, 6);
    expect(detectBoxes(map, { thresh: 0.3, boxThresh: 0.4, unclipRatio: 1.5, maxCandidates: 1000, minSize: 3 })).toHaveLength(2);
  });

  it('fits a rotated rectangle to a tilted line', () => {
    const map = blankMap(120, 120);
    fillRotated(map, 60, 60, 70, 12, 30, 0.9);
    const [box] = detectBoxes(map, { thresh: 0.3, boxThresh: 0.6, unclipRatio: 0, maxCandidates: 10, minSize: 3 });
    if (box === undefined) throw new Error('no box');
    const [tl, tr] = box.quad;
    const angle = (Math.atan2(tr[1] - tl[1], tr[0] - tl[0]) * 180) / Math.PI;
    expect(Math.abs(angle - 30)).toBeLessThan(2);
    const size = quadSize(box.quad);
    // Pixel centres span at most the rectangle, at least the rectangle less one pixel per side.
    expect(size.width).toBeGreaterThan(67);
    expect(size.width).toBeLessThanOrEqual(70.01);
    expect(size.height).toBeGreaterThan(9.5);
    expect(size.height).toBeLessThanOrEqual(12.01);
  });

  it('keeps only the largest regions when there are more than maxCandidates', () => {
    const map = blankMap(100, 40);
    fillRect(map, 5, 5, 20, 12, 0.9);
    fillRect(map, 30, 5, 90, 12, 0.9);
    fillRect(map, 5, 25, 40, 32, 0.9);
    const boxes = detectBoxes(map, { thresh: 0.3, boxThresh: 0.6, unclipRatio: 1.5, maxCandidates: 2, minSize: 3 });
    expect(boxes.map((b) => Math.round(quadSize(b.quad).width)).sort((a, b) => a - b)).toEqual([
      Math.round(35 + (35 * 7 * 3) / (2 * 42)),
      Math.round(60 + (60 * 7 * 3) / (2 * 67)),
    ]);
  });

  it('scores the mean probability of pixels inside the quad', () => {
    const map = blankMap(10, 10);
    fillRect(map, 0, 0, 4, 9, 1);
    expect(meanInside(map, [[0, 0], [9, 0], [9, 9], [0, 9]])).toBeCloseTo(0.5, 6);
  });

  it('maps boxes back to the page and clips them to it', () => {
    const boxes = scaleBoxes(
      [
        { quad: [[-2, 5], [40, 5], [40, 15], [-2, 15]], score: 0.9 },
        { quad: [[10, 20], [11, 20], [11, 21], [10, 21]], score: 0.9 },
      ],
      { from: { width: 50, height: 25 }, to: { width: 100, height: 100 } },
    );
    expect(boxes).toHaveLength(1);
    expectQuad(boxes[0]?.quad ?? [[0, 0], [0, 0], [0, 0], [0, 0]], [[0, 20], [80, 20], [80, 60], [0, 60]]);
  });
});
