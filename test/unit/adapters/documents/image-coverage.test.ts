import { describe, expect, it } from 'vitest';
import { imageCoverage, type CoverageOps } from '../../../../adapters/documents/image-coverage.js';

const OPS: CoverageOps = {
  save: 10,
  restore: 11,
  transform: 12,
  paintFormXObjectBegin: 74,
  paintFormXObjectEnd: 75,
  paintImageXObject: 85,
  paintInlineImageXObject: 86,
  paintImageXObjectRepeat: 88,
};
const PAGE = 612 * 792;

function coverage(ops: [number, unknown][]): number {
  return imageCoverage(
    ops.map(([fn]) => fn),
    ops.map(([, args]) => args),
    PAGE,
    OPS,
  );
}

describe('image coverage of a page', () => {
  it('a full-page scan covers the page', () => {
    expect(coverage([[OPS.save, null], [OPS.transform, [612, 0, 0, 792, 0, 0]], [OPS.paintImageXObject, ['img1', 1700, 2200]], [OPS.restore, null]])).toBe(1);
  });

  it('a logo covers its own area only, and restore undoes the scaling for the next image', () => {
    const value = coverage([
      [OPS.save, null],
      [OPS.transform, [100, 0, 0, 50, 72, 700]],
      [OPS.paintImageXObject, ['logo']],
      [OPS.restore, null],
      // Without the restore this would be 100*50 times larger.
      [OPS.paintInlineImageXObject, [{}]],
    ]);
    expect(value).toBeCloseTo((100 * 50 + 1) / PAGE, 10);
  });

  it('follows nested transforms and form XObject matrices, rotation included', () => {
    const value = coverage([
      [OPS.transform, [2, 0, 0, 2, 0, 0]],
      [OPS.paintFormXObjectBegin, [[0, 1, -1, 0, 300, 0], [0, 0, 10, 10]]],
      [OPS.transform, [100, 0, 0, 80, 0, 0]],
      [OPS.paintImageXObject, ['figure']],
      [OPS.paintFormXObjectEnd, []],
      [OPS.paintImageXObject, ['unit']],
    ]);
    // 2x2 scale × rotation (area-preserving) × 100×80, then a unit image under the 2x2 scale only.
    expect(value).toBeCloseTo((4 * 100 * 80 + 4) / PAGE, 10);
  });

  it('counts every position of a repeated image', () => {
    const value = coverage([
      [OPS.transform, [10, 0, 0, 10, 0, 0]],
      [OPS.paintImageXObjectRepeat, ['dot', 2, 3, new Float32Array([0, 0, 50, 50, 100, 100])]],
    ]);
    expect(value).toBeCloseTo((3 * 10 * 10 * 2 * 3) / PAGE, 10);
  });

  it('a text-only page has no coverage', () => {
    expect(coverage([[OPS.save, null], [OPS.restore, null]])).toBe(0);
  });
});
