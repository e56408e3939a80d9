import { describe, expect, it } from 'vitest';
import {
  cropStrip,
  mapPoint,
  squareToQuad,
  stripsTensor,
  stripWidth,
  stripWindows,
  padQuad,
  turnQuad,
  turnStrip,
  uprightQuad,
  type RgbPixels,
} from '../../../../adapters/models/ocr/ocr-crop.js';
import { convexHull, minAreaRect, orderQuad, quadSize, type Quad } from '../../../../adapters/models/ocr/ocr-geometry.js';
import { detectorSize, detectorTensor } from '../../../../adapters/models/ocr/ocr-input.js';

/** A synthetic page whose red channel is x and green channel is y, so every sample says where it came from. */
function coordinateImage(width: number, height: number): RgbPixels {
  const data = new Uint8Array(width * height * 3);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      data[(y * width + x) * 3] = x;
      data[(y * width + x) * 3 + 1] = y;
      data[(y * width + x) * 3 + 2] = 7;
    }
  }
  return { data, width, height };
}

function pixel(strip: RgbPixels, x: number, y: number): [number, number, number] {
  const i = (y * strip.width + x) * 3;
  return [strip.data[i] ?? -1, strip.data[i + 1] ?? -1, strip.data[i + 2] ?? -1];
}

describe('perspective crop', () => {
  const image = coordinateImage(200, 120);

  it('cuts an axis-aligned box pixel for pixel', () => {
    const strip = cropStrip(image, [[10, 20], [110, 20], [110, 40], [10, 40]], 100, 20);
    expect(pixel(strip, 0, 0)).toEqual([10, 20, 7]);
    expect(pixel(strip, 99, 19)).toEqual([109, 39, 7]);
    expect(pixel(strip, 37, 5)).toEqual([47, 25, 7]);
  });

  it('reads a box turned a quarter turn along its own width', () => {
    // A vertical box: reading it turned counter-clockwise, the strip runs up the page's x = 50..70 band.
    const tall: Quad = [[50, 10], [70, 10], [70, 110], [50, 110]];
    const quad = uprightQuad(tall);
    expect(quad).toEqual(turnQuad(tall, 1));
    const strip = cropStrip(image, quad, 100, 20);
    // Strip left end = the box's top-right corner; strip top edge = the box's right side.
    expect(pixel(strip, 0, 0)).toEqual([69, 10, 7]);
    expect(pixel(strip, 99, 0)).toEqual([69, 109, 7]);
    expect(pixel(strip, 0, 19)).toEqual([50, 10, 7]);
  });

  it('maps the unit square onto any quad, corners and diagonal crossing included', () => {
    const quad: Quad = [[10, 10], [90, 20], [80, 70], [20, 60]];
    const map = squareToQuad(quad);
    [[0, 0], [1, 0], [1, 1], [0, 1]].forEach(([u, v], i) => {
      const [x, y] = mapPoint(map, u ?? 0, v ?? 0);
      expect(x).toBeCloseTo(quad[i]?.[0] ?? NaN, 9);
      expect(y).toBeCloseTo(quad[i]?.[1] ?? NaN, 9);
    });
    // A projective map keeps incidence: the square's centre lands where the quad's diagonals cross.
    const [cx, cy] = mapPoint(map, 0.5, 0.5);
    // Diagonals (10,10)→(80,70) and (90,20)→(20,60): 10 + 70t = 90 − 70s and 10 + 60t = 20 + 40s give t = 3.9 / 7.
    const t = 3.9 / 7;
    expect(cx).toBeCloseTo(10 + t * 70, 9);
    expect(cy).toBeCloseTo(10 + t * 60, 9);
  });

  it('replicates edge pixels for boxes that reach past the page', () => {
    const strip = cropStrip(image, [[-10, -10], [10, -10], [10, 10], [-10, 10]], 20, 20);
    expect(pixel(strip, 0, 0)).toEqual([0, 0, 7]);
    expect(pixel(strip, 19, 19)).toEqual([9, 9, 7]);
  });

  it('turns a strip upside down and cuts it into evenly spread windows', () => {
    const strip = cropStrip(image, [[0, 0], [100, 0], [100, 4], [0, 4]], 100, 4);
    const turned = turnStrip(strip);
    expect(pixel(turned, 0, 0)).toEqual(pixel(strip, 99, 3));
    expect(pixel(turned, 99, 3)).toEqual(pixel(strip, 0, 0));
    const windows = stripWindows(strip, 40, 3);
    expect(windows.map((w) => pixel(w, 0, 0)[0])).toEqual([0, 30, 60]);
    expect(windows.every((w) => w.width === 40 && w.height === 4)).toBe(true);
    expect(stripWindows(strip, 120, 3)).toEqual([strip]);
  });

  it('adds a margin of a share of the box height on every side, along the box\'s own edges', () => {
    expect(padQuad([[10, 20], [110, 20], [110, 40], [10, 40]], 0.1)).toEqual([[8, 18], [112, 18], [112, 42], [8, 42]]);
    // A box tilted by 90°: the margin follows its edges, so the padded box is tilted the same way.
    const padded = padQuad([[50, 10], [50, 110], [30, 110], [30, 10]], 0.5);
    expect(padded.map(([x, y]) => [Math.round(x), Math.round(y)])).toEqual([[60, 0], [60, 120], [20, 120], [20, 0]]);
    expect(padQuad([[0, 0], [1, 0], [1, 1], [0, 1]], 0)).toEqual([[0, 0], [1, 0], [1, 1], [0, 1]]);
  });

  it('sizes strips by aspect ratio within the cap', () => {
    expect(stripWidth([[0, 0], [300, 0], [300, 30], [0, 30]], 48, 2000)).toBe(480);
    expect(stripWidth([[0, 0], [3000, 0], [3000, 10], [0, 10]], 48, 2000)).toBe(2000);
    // Widened for a second reading, within the same cap.
    expect(stripWidth([[0, 0], [300, 0], [300, 30], [0, 30]], 48, 2000, 1.2)).toBe(576);
    expect(stripWidth([[0, 0], [1500, 0], [1500, 30], [0, 30]], 48, 2000, 1.2)).toBe(2000);
  });
});

describe('tensors', () => {
  it('recognizer input: BGR planes in [-1, 1], zero padding on the right', () => {
    const strip: RgbPixels = { data: new Uint8Array([255, 0, 51, 0, 255, 102]), width: 2, height: 1 };
    const tensor = stripsTensor([strip], 1, 3);
    expect(Array.from(tensor).map((v) => Math.round(v * 1000) / 1000)).toEqual([
      51 / 127.5 - 1, 102 / 127.5 - 1, 0, // B
      -1, 1, 0, // G
      1, -1, 0, // R
    ].map((v) => Math.round(v * 1000) / 1000));
  });

  it('detector input: ImageNet statistics on BGR planes', () => {
    const tensor = detectorTensor({ data: new Uint8Array([255, 128, 0]), width: 1, height: 1 });
    expect(tensor[0]).toBeCloseTo((0 - 0.485) / 0.229, 5);
    expect(tensor[1]).toBeCloseTo((128 / 255 - 0.456) / 0.224, 5);
    expect(tensor[2]).toBeCloseTo((1 - 0.406) / 0.225, 5);
  });

  it('detector size: multiples of 32 within the side limit and the memory cap', () => {
    expect(detectorSize(1241, 1754, { limitSideLen: 960, limitType: 'max', maxSideLen: 2560 })).toEqual({ width: 672, height: 960 });
    expect(detectorSize(300, 100, { limitSideLen: 960, limitType: 'max', maxSideLen: 2560 })).toEqual({ width: 288, height: 96 });
    expect(detectorSize(300, 100, { limitSideLen: 736, limitType: 'min', maxSideLen: 4096 })).toEqual({ width: 2208, height: 736 });
    expect(detectorSize(300, 100, { limitSideLen: 736, limitType: 'min', maxSideLen: 1024 })).toEqual({ width: 1024, height: 352 });
    expect(detectorSize(10, 5, { limitSideLen: 960, limitType: 'max', maxSideLen: 2560 })).toEqual({ width: 32, height: 32 });
  });
});

describe('geometry', () => {
  it('hull, minimum-area rectangle and corner order', () => {
    expect(convexHull([[0, 0], [2, 0], [1, 1], [2, 2], [0, 2], [1, 0]])).toHaveLength(4);
    const rect = minAreaRect([[0, 0], [4, 0], [4, 2], [0, 2], [2, 1]]);
    expect(rect.width * rect.height).toBeCloseTo(8, 9);
    expect(orderQuad([[4, 2], [0, 0], [0, 2], [4, 0]])).toEqual([[0, 0], [4, 0], [4, 2], [0, 2]]);
    // Width: the longer of top (4) and bottom (5); height: the longer of left (3) and right (√10).
    const size = quadSize([[0, 0], [4, 0], [5, 3], [0, 3]]);
    expect(size.width).toBe(5);
    expect(size.height).toBeCloseTo(Math.sqrt(10), 12);
  });
});
