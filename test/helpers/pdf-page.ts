import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openPdf, renderPdfPage } from '../../adapters/documents/pdf-reader.js';

/**
 * A PDF page as an OCR engine sees it (PNG at a resolution) and as its own text layer says it
 * (pdfjs text, the reference for word-F1), for OCR tests and bench/ocr.ts. Rendering uses
 * pdftoppm when poppler-utils is installed, else pdfjs through the project's PDF reader (the
 * renderer the document pipeline itself uses for OCR).
 */

export interface RenderedPage {
  png: Uint8Array;
  /** The page's text layer, lines joined by newlines. */
  text: string;
  renderer: 'pdftoppm' | 'pdfjs';
}

export function hasPdftoppm(): boolean {
  return spawnSync('pdftoppm', ['-v'], { stdio: 'ignore' }).error === undefined;
}

function renderWithPoppler(file: string, page: number, dpi: number): Uint8Array {
  const dir = mkdtempSync(join(tmpdir(), 'shoal-render-'));
  try {
    const stem = join(dir, 'page');
    const result = spawnSync('pdftoppm', ['-r', String(dpi), '-f', String(page), '-l', String(page), '-singlefile', '-png', file, stem]);
    if (result.status !== 0) throw new Error(`pdftoppm failed on ${file} page ${page}: ${String(result.stderr)}`);
    return new Uint8Array(readFileSync(`${stem}.png`));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export async function renderPage(file: string, page: number, dpi: number, renderer: 'auto' | 'pdftoppm' | 'pdfjs' = 'auto'): Promise<RenderedPage> {
  const doc = await openPdf(new Uint8Array(readFileSync(file)));
  try {
    const content = await (await doc.getPage(page)).getTextContent();
    const text = content.items.map((item) => ('str' in item ? `${item.str}${item.hasEOL ? '\n' : ' '}` : '')).join('');
    const poppler = renderer === 'pdftoppm' || (renderer === 'auto' && hasPdftoppm());
    const png = poppler ? renderWithPoppler(file, page, dpi) : await renderPdfPage(doc, page, dpi);
    return { png, text, renderer: poppler ? 'pdftoppm' : 'pdfjs' };
  } finally {
    await doc.destroy();
  }
}
