/**
 * How much of a PDF page its images cover, from the page's operator list: the current
 * transformation matrix is followed through save/restore, `cm` and form XObjects, and every
 * painted image (which fills the unit square under that matrix) adds the area of its
 * parallelogram. A scanned page is one image covering the whole page.
 */

export type Matrix = [number, number, number, number, number, number];

/** The operator codes this needs (pdfjs's `OPS` table, passed in to keep this module pdfjs-free). */
export interface CoverageOps {
  save: number;
  restore: number;
  transform: number;
  paintFormXObjectBegin: number;
  paintFormXObjectEnd: number;
  paintImageXObject: number;
  paintInlineImageXObject: number;
  paintImageXObjectRepeat: number;
}

function multiply(m: Matrix, n: Matrix): Matrix {
  // PDF order: n is applied first, then m (the same as pdfjs's Util.transform(m, n)).
  return [
    m[0] * n[0] + m[2] * n[1],
    m[1] * n[0] + m[3] * n[1],
    m[0] * n[2] + m[2] * n[3],
    m[1] * n[2] + m[3] * n[3],
    m[0] * n[4] + m[2] * n[5] + m[4],
    m[1] * n[4] + m[3] * n[5] + m[5],
  ];
}

function asMatrix(value: unknown): Matrix | null {
  if (!Array.isArray(value) && !ArrayBuffer.isView(value)) return null;
  const list = Array.from(value as ArrayLike<unknown>);
  if (list.length !== 6 || !list.every((entry) => typeof entry === 'number' && Number.isFinite(entry))) return null;
  return list as Matrix;
}

/**
 * Share of the page area (0..1) covered by images. Overlapping images are counted once each, so
 * the sum is capped at 1; that only matters for pages already counted as covered.
 */
export function imageCoverage(fnArray: ArrayLike<number>, argsArray: ArrayLike<unknown>, pageArea: number, ops: CoverageOps): number {
  if (pageArea <= 0) return 0;
  let ctm: Matrix = [1, 0, 0, 1, 0, 0];
  const stack: Matrix[] = [];
  let area = 0;
  for (let i = 0; i < fnArray.length; i++) {
    const fn = fnArray[i];
    const args = argsArray[i];
    switch (fn) {
      case ops.save:
        stack.push(ctm);
        break;
      case ops.restore:
        ctm = stack.pop() ?? ctm;
        break;
      case ops.transform: {
        const matrix = asMatrix(args);
        if (matrix !== null) ctm = multiply(ctm, matrix);
        break;
      }
      case ops.paintFormXObjectBegin: {
        stack.push(ctm);
        const matrix = Array.isArray(args) ? asMatrix(args[0]) : null;
        if (matrix !== null) ctm = multiply(ctm, matrix);
        break;
      }
      case ops.paintFormXObjectEnd:
        ctm = stack.pop() ?? ctm;
        break;
      case ops.paintImageXObject:
      case ops.paintInlineImageXObject:
        area += Math.abs(ctm[0] * ctm[3] - ctm[1] * ctm[2]);
        break;
      case ops.paintImageXObjectRepeat: {
        // args: [objId, scaleX, scaleY, positions]; each position paints the image once.
        const list = Array.isArray(args) ? args : [];
        const scaleX = typeof list[1] === 'number' ? list[1] : 0;
        const scaleY = typeof list[2] === 'number' ? list[2] : 0;
        const positions = list[3];
        const count = ArrayBuffer.isView(positions) || Array.isArray(positions) ? (positions as ArrayLike<unknown>).length / 2 : 0;
        area += Math.abs((ctm[0] * ctm[3] - ctm[1] * ctm[2]) * scaleX * scaleY) * count;
        break;
      }
      default:
        break;
    }
    if (area >= pageArea) return 1;
  }
  return area / pageArea;
}
