/**
 * Plane geometry for OCR boxes (pure): convex hull, minimum-area rotated rectangle, corner order,
 * quadrilateral size and point-in-quadrilateral tests. Coordinates are pixel centres in image or
 * probability-map space, x to the right and y downwards.
 */

export type Point = readonly [number, number];
/** Four corners clockwise from top-left: top-left, top-right, bottom-right, bottom-left. */
export type Quad = readonly [Point, Point, Point, Point];

function cross(o: Point, a: Point, b: Point): number {
  return (a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0]);
}

/** Convex hull (Andrew's monotone chain), counter-clockwise in y-up terms, no repeated points. */
export function convexHull(points: readonly Point[]): Point[] {
  const sorted = [...points].sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  if (sorted.length <= 2) return sorted;
  const lower: Point[] = [];
  for (const p of sorted) {
    while (lower.length >= 2 && cross(lower[lower.length - 2] ?? p, lower[lower.length - 1] ?? p, p) <= 0) lower.pop();
    lower.push(p);
  }
  const upper: Point[] = [];
  for (let i = sorted.length - 1; i >= 0; i--) {
    const p = sorted[i] ?? [0, 0];
    while (upper.length >= 2 && cross(upper[upper.length - 2] ?? p, upper[upper.length - 1] ?? p, p) <= 0) upper.pop();
    upper.push(p);
  }
  lower.pop();
  upper.pop();
  return lower.concat(upper);
}

export interface RotatedRect {
  center: Point;
  /** Unit vector along the rectangle's `width` side. */
  axis: Point;
  width: number;
  height: number;
}

/**
 * The smallest-area rectangle enclosing the points: one of its sides lies on a hull edge, so each
 * edge direction is tried (the hulls of text components have tens of points, so O(n²) is cheap).
 */
export function minAreaRect(points: readonly Point[]): RotatedRect {
  const hull = convexHull(points);
  const first = hull[0] ?? [0, 0];
  if (hull.length === 1) return { center: first, axis: [1, 0], width: 0, height: 0 };
  let best: RotatedRect | null = null;
  let bestArea = Infinity;
  for (let i = 0; i < hull.length; i++) {
    const a = hull[i] ?? first;
    const b = hull[(i + 1) % hull.length] ?? first;
    const length = Math.hypot(b[0] - a[0], b[1] - a[1]);
    if (length === 0) continue;
    const ux = (b[0] - a[0]) / length;
    const uy = (b[1] - a[1]) / length;
    let minU = Infinity;
    let maxU = -Infinity;
    let minV = Infinity;
    let maxV = -Infinity;
    for (const p of hull) {
      const u = p[0] * ux + p[1] * uy;
      const v = -p[0] * uy + p[1] * ux;
      if (u < minU) minU = u;
      if (u > maxU) maxU = u;
      if (v < minV) minV = v;
      if (v > maxV) maxV = v;
    }
    const area = (maxU - minU) * (maxV - minV);
    if (area < bestArea - 1e-9) {
      bestArea = area;
      const cu = (minU + maxU) / 2;
      const cv = (minV + maxV) / 2;
      best = { center: [cu * ux - cv * uy, cu * uy + cv * ux], axis: [ux, uy], width: maxU - minU, height: maxV - minV };
    }
  }
  return best ?? { center: first, axis: [1, 0], width: 0, height: 0 };
}

/** The same rectangle grown by `distance` on every side. */
export function growRect(rect: RotatedRect, distance: number): RotatedRect {
  return { ...rect, width: rect.width + 2 * distance, height: rect.height + 2 * distance };
}

/**
 * Corners in reading orientation: of the two leftmost corners the upper is top-left, of the two
 * rightmost the upper is top-right. This keeps a slightly tilted line's corners where a reader
 * expects them whichever of its sides minAreaRect called `width`.
 */
export function orderQuad(corners: readonly Point[]): Quad {
  const byX = [...corners].sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  const origin: Point = [0, 0];
  const [l1, l2, r1, r2] = [byX[0] ?? origin, byX[1] ?? origin, byX[2] ?? origin, byX[3] ?? origin];
  const [topLeft, bottomLeft] = l1[1] <= l2[1] ? [l1, l2] : [l2, l1];
  const [topRight, bottomRight] = r1[1] <= r2[1] ? [r1, r2] : [r2, r1];
  return [topLeft, topRight, bottomRight, bottomLeft];
}

export function rectCorners(rect: RotatedRect): Quad {
  const [cx, cy] = rect.center;
  const [ux, uy] = rect.axis;
  const hw = rect.width / 2;
  const hh = rect.height / 2;
  const corner = (su: number, sv: number): Point => [cx + su * hw * ux - sv * hh * uy, cy + su * hw * uy + sv * hh * ux];
  return orderQuad([corner(-1, -1), corner(1, -1), corner(1, 1), corner(-1, 1)]);
}

function distance(a: Point, b: Point): number {
  return Math.hypot(a[0] - b[0], a[1] - b[1]);
}

/** Width (longer of top and bottom edges) and height (longer of left and right edges) of a quad. */
export function quadSize(quad: Quad): { width: number; height: number } {
  const [tl, tr, br, bl] = quad;
  return { width: Math.max(distance(tl, tr), distance(bl, br)), height: Math.max(distance(tl, bl), distance(tr, br)) };
}

/** True when `p` is inside the convex quad or on its border (corners in either winding). */
export function insideQuad(quad: Quad, x: number, y: number): boolean {
  let sign = 0;
  for (let i = 0; i < 4; i++) {
    const a = quad[i] ?? quad[0];
    const b = quad[(i + 1) % 4] ?? quad[0];
    const side = (b[0] - a[0]) * (y - a[1]) - (b[1] - a[1]) * (x - a[0]);
    if (Math.abs(side) < 1e-9) continue;
    const s = side > 0 ? 1 : -1;
    if (sign === 0) sign = s;
    else if (s !== sign) return false;
  }
  return true;
}

export function quadBounds(quad: Quad): { left: number; top: number; right: number; bottom: number } {
  const xs = quad.map((p) => p[0]);
  const ys = quad.map((p) => p[1]);
  return { left: Math.min(...xs), top: Math.min(...ys), right: Math.max(...xs), bottom: Math.max(...ys) };
}
