import { quadBounds, type Quad } from './ocr-geometry.js';

/**
 * Reading order of OCR boxes (pure): boxes are grouped into rows, top to bottom, and each row is
 * read left to right. A box joins a row when it overlaps the row's vertical band by at least
 * `overlap` of the smaller of the two heights; the band is the row's first box, never the union,
 * so a slightly tilted page or a neighbouring column cannot make one row swallow the next.
 * Multi-column layouts come out row by row (like `pdftotext -layout`), not column by column.
 */

export interface OrderOptions {
  /** Share of the smaller height two boxes must overlap vertically to sit in one row. @default 0.5 */
  overlap: number;
}

const DEFAULT_ORDER: OrderOptions = { overlap: 0.5 };

interface Band {
  top: number;
  bottom: number;
  members: number[];
}

/** Indices of `quads` row by row, each row left to right. */
export function readingRows(quads: readonly Quad[], options: OrderOptions = DEFAULT_ORDER): number[][] {
  const bounds = quads.map(quadBounds);
  const byCentre = quads
    .map((_, index) => index)
    .sort((a, b) => {
      const ba = bounds[a];
      const bb = bounds[b];
      if (ba === undefined || bb === undefined) return a - b;
      return ba.top + ba.bottom - (bb.top + bb.bottom) || ba.left - bb.left || a - b;
    });
  const bands: Band[] = [];
  for (const index of byCentre) {
    const box = bounds[index];
    if (box === undefined) continue;
    const height = box.bottom - box.top;
    let best: Band | null = null;
    let bestShare = 0;
    // Rows are created in centre order, so only the last few can still overlap this box.
    for (let i = bands.length - 1; i >= 0 && i >= bands.length - 8; i--) {
      const band = bands[i];
      if (band === undefined) continue;
      const shared = Math.min(box.bottom, band.bottom) - Math.max(box.top, band.top);
      const smaller = Math.min(height, band.bottom - band.top);
      const share = smaller <= 0 ? 0 : shared / smaller;
      if (share >= options.overlap && share > bestShare) {
        best = band;
        bestShare = share;
      }
    }
    if (best === null) bands.push({ top: box.top, bottom: box.bottom, members: [index] });
    else best.members.push(index);
  }
  const left = (index: number): number => bounds[index]?.left ?? 0;
  return bands
    .sort((a, b) => a.top + a.bottom - (b.top + b.bottom))
    .map((band) => band.members.sort((a, b) => left(a) - left(b) || a - b));
}

/** Page text: the rows' texts, boxes of a row separated by a space, rows by a newline. */
export function pageText(rows: readonly number[][], texts: readonly string[]): string {
  return rows
    .map((row) => row.map((index) => texts[index] ?? '').filter((text) => text !== '').join(' '))
    .filter((line) => line !== '')
    .join('\n');
}
