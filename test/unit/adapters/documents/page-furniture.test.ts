import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { dropPageFurniture, isOwnPageNumber, type FurniturePage } from '../../../../adapters/documents/page-furniture.js';
import { openPdf, readPdfPage } from '../../../../adapters/documents/pdf-reader.js';
import { DATA_DIR, sharedAvailable } from '../../../helpers/shared.js';

/**
 * Page numbers, running heads and feet and margin stamps leave the page text; nothing in the body
 * of a page does, and heading offsets follow the text.
 */

const PDF_DIR = join(DATA_DIR, 'pdfs');

function page(number: number, lines: string[], headings?: { offset: number; text: string }[]): FurniturePage {
  return { page: number, text: lines.join('\n'), ...(headings === undefined ? {} : { headings }) };
}

async function readPages(file: string): Promise<FurniturePage[]> {
  const doc = await openPdf(new Uint8Array(readFileSync(join(PDF_DIR, file))));
  try {
    const pages: FurniturePage[] = [];
    for (let number = 1; number <= doc.numPages; number++) {
      const read = await readPdfPage(doc, number, { mode: 'never', measureImages: false });
      pages.push({ page: number, text: read.text, headings: read.headings });
    }
    return pages;
  } finally {
    await doc.destroy();
  }
}

describe('isOwnPageNumber', () => {
  it('reads the usual page labels, and only the page it is on', () => {
    for (const label of ['3', ' 3 ', 'iii', 'III', 'Page 3', 'page 3 of 12', '3 / 12', '- 3 -', '— 3 —']) expect(isOwnPageNumber(label, 3), label).toBe(true);
    for (const label of ['4', 'iv', 'Page 4', '3.', 'Chapter 3', '33', '2023', 'x 3', '']) expect(isOwnPageNumber(label, 3), label).toBe(false);
    expect(isOwnPageNumber('xiv', 14)).toBe(true);
    expect(isOwnPageNumber('mmxxvi', 2026)).toBe(true);
  });
});

describe('dropPageFurniture', () => {
  it("removes a page's own number at its very edge, in a document of any length", () => {
    const [only] = dropPageFurniture([page(1, ['A one-page note.', '', 'It ends here.', '', '1'])]);
    expect(only?.text).toBe('A one-page note.\n\nIt ends here.');
    // Not its own number, or not at the edge: kept.
    expect(dropPageFurniture([page(1, ['A note.', '7'])])[0]?.text).toBe('A note.\n7');
    expect(dropPageFurniture([page(2, ['Intro', 'Total', '2', 'More text after the number.', 'Last line.'])])[0]?.text).toBe(
      'Intro\nTotal\n2\nMore text after the number.\nLast line.',
    );
  });

  it('removes running heads and feet that stand on a fifth of the pages (three at least), a running page number aside, from the edge inwards', () => {
    const pages = [1, 2, 3, 4, 5, 6].map((n) =>
      page(n, [
        n % 2 === 1 ? `${47_698 + n} Federal Register` : 'Federal Register',
        `Body ${n * 17} starts here.`,
        'It goes on.',
        `Body ${n * 17} ends here.`,
        `E:\\FR\\FM\\0${n}AUP1.SGM`,
        'jbell on DSKJLSW7X2PROD with PROPOSALS',
      ]),
    );
    const cleaned = dropPageFurniture(pages);
    cleaned.forEach((cleanedPage, index) => {
      expect(cleanedPage.text).toBe(`Body ${(index + 1) * 17} starts here.\nIt goes on.\nBody ${(index + 1) * 17} ends here.`);
    });
  });

  it('never removes a line in the body, a long line, or a repeat on too few pages', () => {
    const body = 'The same clause stands in the middle of every page.';
    const long = `${'A long repeated sentence is content, not furniture. '.repeat(3)}`.trim();
    // Lines alike but for numbers that do not follow the page (table rows, dates) stay too.
    const pages = [1, 2, 3, 4, 5, 6].map((n) =>
      page(n, [long, `07/${10 + n}/2015 Boeing Company Long Beach ${n * 7} Layoff`, `More ${n * 3}.`, body, `Closing ${n * n}.`, `Last ${n * 5}.`, n <= 2 ? 'Draft' : `Signed ${n * n}`]),
    );
    const cleaned = dropPageFurniture(pages);
    expect(cleaned.map((p) => p.text)).toEqual(pages.map((p) => p.text));
    // Two short documents: nothing repeats on three pages.
    const two = [page(1, ['Header', 'one']), page(2, ['Header', 'two'])];
    expect(dropPageFurniture(two).map((p) => p.text)).toEqual(['Header\none', 'Header\ntwo']);
  });

  it('removes a head whose pieces move by a line, and the same head or stamp where reading order put it inside a page', () => {
    const head = '/ Vol. 85 / Proposed Rules';
    const stamp = 'VerDate 2014 Jkt 250001';
    const pages = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].map((n) =>
      page(n, n <= 8
        // Under one line of head on odd pages, two on even ones; the stamp at the foot.
        ? [...(n % 2 === 1 ? [`${47_700 + n} Federal Register`] : ['Federal Register', `${47_700 + n}`]), head, `Body ${n * 13} starts.`, 'It goes on.', `Body ${n * 13} ends.`, stamp]
        // Pages 9 and 10: head and stamp set inside the text.
        : [`Figure ${n * 13} text.`, stamp, 'It goes on.', head, `Figure ${n * 13} ends.`]),
    );
    const cleaned = dropPageFurniture(pages).map((p) => p.text);
    expect(cleaned.slice(0, 8)).toEqual([1, 2, 3, 4, 5, 6, 7, 8].map((n) => `Body ${n * 13} starts.\nIt goes on.\nBody ${n * 13} ends.`));
    // 'It goes on.' repeats on every page but never as furniture at an edge: it stays.
    expect(cleaned.slice(8)).toEqual([9, 10].map((n) => `Figure ${n * 13} text.\nIt goes on.\nFigure ${n * 13} ends.`));
  });

  it('moves heading offsets with the text and drops a heading that was furniture', () => {
    const lines = ['Federal Register', '', 'Summary', 'The rule applies.', '', '5'];
    const pages = [5, 6, 7].map((n) =>
      page(n, lines.map((line) => (line === '5' ? String(n) : line === 'The rule applies.' ? `Rule ${n * 11} applies.` : line === 'Summary' ? `Summary ${n * n}` : line)), [
        { offset: 0, text: 'Federal Register' },
        { offset: lines.slice(0, 2).join('\n').length + 1, text: `Summary ${n * n}` },
      ]),
    );
    const [first] = dropPageFurniture(pages);
    expect(first?.text).toBe('Summary 25\nRule 55 applies.');
    expect(first?.headings).toEqual([{ offset: 0, text: 'Summary 25' }]);
  });

  it.skipIf(!sharedAvailable(PDF_DIR))('cleans the shared PDFs: page numbers, the Federal Register heads and stamps', async () => {
    const latex = dropPageFurniture(await readPages('004-pdflatex-4-pages__pdflatex-4-pages.pdf'));
    for (const cleaned of latex) {
      expect(cleaned.text.trim().split('\n').at(-1), `page ${cleaned.page}`).not.toBe(String(cleaned.page));
      expect(cleaned.text.length).toBeGreaterThan(500);
    }
    const original = await readPages('pdfplumber__federal-register-2020-17221.pdf');
    const register = dropPageFurniture(original);
    for (const [index, cleaned] of register.entries()) {
      // The typesetter's stamps at the foot of every page; the same stamps set in the middle of a
      // page's text (some pages have them there) are left alone.
      expect(cleaned.text.trim().split('\n').at(-1), `page ${cleaned.page}`).not.toMatch(/^(06AUP1|E:\\FR\\FM\\06AUP1\.SGM|jbell on DSKJLSW7X2PROD with PROPOSALS)$/);
      // Only whole lines went: the cleaned lines are the original's, in order.
      const kept = cleaned.text.split('\n');
      let next = 0;
      for (const line of original[index]?.text.split('\n') ?? []) if (next < kept.length && kept[next] === line) next += 1;
      expect(next, `page ${cleaned.page}`).toBe(kept.length);
      // A few short lines a page: at most 8 of 120 characters.
      expect((original[index]?.text.length ?? 0) - cleaned.text.length, `page ${cleaned.page}`).toBeLessThanOrEqual(8 * 121);
      // A heading kept points at the same text as before (a heading over several lines has its
      // lines joined by spaces, so the text after the offset is compared, not the heading's).
      for (const heading of cleaned.headings ?? []) {
        const before = original[index]?.headings?.find((candidate) => candidate.text === heading.text);
        expect(before, heading.text).toBeDefined();
        expect(cleaned.text.slice(heading.offset, heading.offset + 40)).toBe(original[index]?.text.slice(before?.offset, (before?.offset ?? 0) + 40));
      }
    }
    // The running head, in each of the forms it takes on at least three pages; "47706 Federal
    // Register / Vol. 85, …" stands on pages 9 and 11 only, two pages, and stays.
    const headed = (pages: readonly FurniturePage[]): number[] => pages.filter((p) => /^(\d+ )?Federal Register( \/ Vol\. 85.*)?$/.test(p.text.split('\n')[0] ?? '')).map((p) => p.page);
    expect(headed(original)).toEqual([2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]);
    expect(headed(register)).toEqual([9, 11]);
    // The head's second piece ("/ Vol. 85, …"), one or two lines under the first, and the printed
    // page numbers ("47703" on page 6): gone, at the edge and where reading order set them inside
    // the text (pages 2, 3, 4, 13 and 15).
    const lineStarting = (pages: readonly FurniturePage[], pattern: RegExp): number[] => pages.filter((p) => p.text.split('\n').some((line) => pattern.test(line))).map((p) => p.page);
    expect(lineStarting(original, /^\/ Vol\. 85, No\. 152/)).toEqual([2, 3, 4, 5, 6, 7, 13, 14, 15]);
    expect(lineStarting(register, /^\/ Vol\. 85, No\. 152/)).toEqual([]);
    expect(lineStarting(original, /^477\d\d$/)).toEqual([4, 6, 14]);
    expect(lineStarting(register, /^477\d\d$/)).toEqual([]);
    const stamped = (pages: readonly FurniturePage[]): number[] => pages.filter((p) => p.text.trim().endsWith('jbell on DSKJLSW7X2PROD with PROPOSALS')).map((p) => p.page);
    // Seven pages end with the stamp; pages 12 to 14 carry it inside their text, where it stays.
    expect(stamped(original)).toEqual([1, 2, 3, 4, 5, 6, 15]);
    expect(stamped(register)).toEqual([]);
    expect(register.filter((p) => p.text.includes('jbell on DSKJLSW7X2PROD')).map((p) => p.page)).toEqual([12, 13, 14]);
  }, 120_000);
});
