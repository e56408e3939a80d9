import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openPdf, renderPdfPage } from '../../adapters/documents/pdf-reader.js';
import { wrapText, writePdf, type TextLineSpec } from '../../adapters/documents/pdf-writer.js';
import { ErrorCode } from '../../adapters/protocol/errors.js';
import type { ParsedDocument, ParseOutcome } from '../../pipelines/documents/document.js';
import { DocumentParser } from '../../pipelines/documents/parse.js';
import { InferenceEngine } from '../../pipelines/inference/engine.js';
import { DATA_DIR, REPO_ROOT, missingReason, sharedAvailable } from '../helpers/shared.js';

/**
 * The parse stage on real files: every PDF of ../shared/data/pdfs against poppler's own reading
 * (page counts from pdfinfo, words from pdftotext), the encrypted one failing alone; a two-column
 * LaTeX page read column by column; a scanned page (an image-only PDF made here) read by the real
 * built-in OCR model; HTML, Markdown and text files; magic-byte detection; each kind of bad
 * document failing with its own code while the parser goes on; a crashed parse thread failing
 * only its document.
 */

const PDF_DIR = join(DATA_DIR, 'pdfs');
const ENCRYPTED = '005-libreoffice-writer-password__libreoffice-writer-password.pdf';
const TWO_COLUMNS = '026-latex-multicolumn__multicolumn.pdf';
/** Page counts as `pdfinfo` reports them (checked against pdfinfo itself when it is installed). */
const PAGE_COUNTS: Record<string, number> = {
  '001-trivial__minimal-document.pdf': 1,
  '002-trivial-libre-office-writer__002-trivial-libre-office-writer.pdf': 1,
  '004-pdflatex-4-pages__pdflatex-4-pages.pdf': 4,
  '006-pdflatex-outline__pdflatex-outline.pdf': 4,
  '009-pdflatex-geotopo__GeoTopo-komprimiert.pdf': 117,
  '011-google-doc-document__google-doc-document.pdf': 1,
  '021-pdfa__crazyones-pdfa.pdf': 1,
  '026-latex-multicolumn__multicolumn.pdf': 3,
  'pdfplumber__WARN-Report-for-7-1-2015-to-03-25-2016.pdf': 16,
  'pdfplumber__cupertino_usd_4-6-16.pdf': 1,
  'pdfplumber__federal-register-2020-17221.pdf': 15,
  'pdfplumber__la-precinct-bulletin-2014-p1.pdf': 1,
  'pdfplumber__nics-background-checks-2015-11.pdf': 1,
  'pdfplumber__scotus-transcript-p1.pdf': 1,
  'pdfplumber__senate-expenditures.pdf': 1,
};

function hasTool(name: string): boolean {
  return spawnSync(name, ['-v'], { stdio: 'ignore' }).error === undefined;
}

function words(text: string): string[] {
  return text
    .normalize('NFKC')
    .toLowerCase()
    .split(/[^\p{L}\p{N}]+/u)
    .filter((word) => word.length > 1);
}

/** The reference's words (with multiplicity), how many of them the candidate has, and the candidate's words left over. */
function wordCounts(candidate: string, reference: string): { wanted: number; found: number; extra: number } {
  const available = new Map<string, number>();
  for (const word of words(candidate)) available.set(word, (available.get(word) ?? 0) + 1);
  const wanted = words(reference);
  let found = 0;
  for (const word of wanted) {
    const left = available.get(word) ?? 0;
    if (left > 0) {
      found++;
      available.set(word, left - 1);
    }
  }
  let extra = 0;
  for (const left of available.values()) extra += left;
  return { wanted: wanted.length, found, extra };
}

/** Share of the reference's words (with multiplicity) found in the candidate. */
function wordRecall(candidate: string, reference: string): number {
  const counts = wordCounts(candidate, reference);
  return counts.wanted === 0 ? 1 : counts.found / counts.wanted;
}

function ok(outcome: ParseOutcome): ParsedDocument {
  if (!outcome.ok) throw new Error(`${outcome.source} failed: ${outcome.code} ${outcome.reason}`);
  return outcome.document;
}

function failure(outcome: ParseOutcome): { code: string; reason: string } {
  if (outcome.ok) throw new Error(`${outcome.document.source} was expected to fail but parsed`);
  return { code: outcome.code, reason: outcome.reason };
}

const flat = (text: string): string => text.replace(/\s+/g, ' ');

let engine: InferenceEngine;
let parser: DocumentParser;
let workDir: string;

beforeAll(() => {
  workDir = mkdtempSync(join(tmpdir(), 'shoal-parse-'));
  engine = new InferenceEngine();
  parser = new DocumentParser(engine);
});
afterAll(async () => {
  await parser.close();
  await engine.close();
  rmSync(workDir, { recursive: true, force: true });
});

describe.skipIf(!sharedAvailable(PDF_DIR))('the shared PDFs', () => {
  it('every PDF parses with its page count and poppler\'s words, except the encrypted one, which fails alone with DOCUMENT_ENCRYPTED', async (ctx) => {
    if (!sharedAvailable(PDF_DIR)) ctx.skip(missingReason(PDF_DIR));
    const files = readdirSync(PDF_DIR).filter((name) => name.endsWith('.pdf')).sort();
    expect(files).toHaveLength(16);
    const pages: { source: string; page: number }[] = [];
    // Furniture kept: poppler's text, the reference, has the running heads and stamps (a figure
    // page of the Federal Register is half stamps); leaving them out is checked on its own below.
    const local = new DocumentParser(engine, { furniture: 'keep', onPage: (info) => pages.push({ source: info.source, page: info.page }) });
    try {
      // All at once, as a run would: two parse threads share them.
      const outcomes = await Promise.all(files.map((name) => local.parse({ uri: name, path: join(PDF_DIR, name) })));
      const poppler = hasTool('pdftotext') && hasTool('pdfinfo');
      for (const [index, name] of files.entries()) {
        const outcome = outcomes[index];
        if (outcome === undefined) throw new Error('missing outcome');
        if (name === ENCRYPTED) {
          expect(failure(outcome).code).toBe(ErrorCode.DOCUMENT_ENCRYPTED);
          expect(failure(outcome).reason).toMatch(/password/);
          continue;
        }
        const document = ok(outcome);
        expect(document.type).toBe('pdf');
        expect(document.pages.map((page) => page.page)).toEqual(Array.from({ length: PAGE_COUNTS[name] ?? -1 }, (_, i) => i + 1));
        expect(document.contentHash).toMatch(/^[0-9a-f]{64}$/);
        expect(document.bytes).toBe(readFileSync(join(PDF_DIR, name)).length);
        expect(pages.filter((page) => page.source === name)).toHaveLength(document.pages.length);
        const text = document.pages.map((page) => page.text).join('\n');
        expect(text.trim().length).toBeGreaterThan(100);
        if (poppler) {
          const info = spawnSync('pdfinfo', [join(PDF_DIR, name)], { encoding: 'utf8' }).stdout;
          expect(Number(/Pages:\s+(\d+)/.exec(info)?.[1])).toBe(document.pages.length);
          // Pages read from their text layer must hold poppler's words, and not many more (no
          // duplicated or invented text). Math (GeoTopo) is the exception poppler and Shoal
          // disagree on: subscripts and primes glued to their base ("x0") or not ("x 0").
          let wanted = 0;
          let found = 0;
          let extra = 0;
          for (const page of document.pages.filter((candidate) => !candidate.ocr)) {
            const reference = spawnSync('pdftotext', ['-f', String(page.page), '-l', String(page.page), join(PDF_DIR, name), '-'], { encoding: 'utf8' }).stdout;
            const counts = wordCounts(page.text, reference);
            expect(counts.found / Math.max(1, counts.wanted), `${name} page ${page.page}`).toBeGreaterThanOrEqual(0.6);
            wanted += counts.wanted;
            found += counts.found;
            extra += counts.extra;
          }
          expect(found / wanted, `${name}: share of poppler's words found`).toBeGreaterThanOrEqual(name.startsWith('009-') ? 0.95 : 0.98);
          expect(extra / wanted, `${name}: words poppler does not have`).toBeLessThanOrEqual(0.03);
        }
      }
    } finally {
      await local.close();
    }
  }, 600_000);

  it('a long PDF read by two threads at once (pages shared out) comes back identical to one thread\'s reading, in page order', async (ctx) => {
    if (!sharedAvailable(PDF_DIR)) ctx.skip(missingReason(PDF_DIR));
    const path = join(PDF_DIR, '009-pdflatex-geotopo__GeoTopo-komprimiert.pdf');
    const read = async (threads: number): Promise<ParsedDocument> => {
      const local = new DocumentParser(engine, { threads, ocr: 'never' });
      try {
        return ok(await local.parse({ uri: 'geotopo.pdf', path }));
      } finally {
        await local.close();
      }
    };
    const [single, shared] = [await read(1), await read(2)];
    expect(shared.pages.map((page) => page.page)).toEqual(Array.from({ length: 117 }, (_, i) => i + 1));
    expect(shared).toEqual(single);
  }, 300_000);

  it('leaves page numbers, running heads and stamps out of the text by default, and keeps them with furniture: keep', async (ctx) => {
    if (!sharedAvailable(PDF_DIR)) ctx.skip(missingReason(PDF_DIR));
    const latex = { uri: 'latex.pdf', path: join(PDF_DIR, '004-pdflatex-4-pages__pdflatex-4-pages.pdf') };
    const register = { uri: 'register.pdf', path: join(PDF_DIR, 'pdfplumber__federal-register-2020-17221.pdf') };
    // Text layers only on both sides (OCR of the register's figure pages took a minute and is not what is compared).
    const keeping = new DocumentParser(engine, { ocr: 'never', furniture: 'keep' });
    const dropping = new DocumentParser(engine, { ocr: 'never' });
    try {
      const lastLines = (document: ParsedDocument): string[] => document.pages.map((page) => page.text.trim().split('\n').at(-1) ?? '');
      expect(lastLines(ok(await keeping.parse(latex)))).toEqual(['1', '2', '3', '4']);
      expect(lastLines(ok(await dropping.parse(latex))).filter((line) => /^\d+$/.test(line))).toEqual([]);
      const kept = ok(await keeping.parse(register));
      const dropped = ok(await dropping.parse(register));
      const stamped = (document: ParsedDocument): number => document.pages.filter((page) => page.text.trim().endsWith('jbell on DSKJLSW7X2PROD with PROPOSALS')).length;
      expect(stamped(kept)).toBe(7);
      expect(stamped(dropped)).toBe(0);
      // The running head was the first heading of page 2: the title comes from the PDF's own metadata or first real heading.
      expect(dropped.pages[1]?.headings?.map((heading) => heading.text)).not.toContain('Federal Register');
      expect(kept.pages[1]?.headings?.map((heading) => heading.text)).toContain('Federal Register');
    } finally {
      await keeping.close();
      await dropping.close();
    }
  }, 300_000);

  it('reads the LaTeX two-column page column by column: each column\'s sentences are contiguous, the left column before the right', async (ctx) => {
    if (!sharedAvailable(PDF_DIR)) ctx.skip(missingReason(PDF_DIR));
    const document = ok(await parser.parse({ uri: TWO_COLUMNS, path: join(PDF_DIR, TWO_COLUMNS) }));
    const page = flat(document.pages[0]?.text ?? '');
    // Left column, across three lines (and a hyphenated word); right column, across two.
    const left = 'Lorem ipsum dolor sit amet, consectetuer adipiscing elit. Ut purus elit, vestibulum ut, placerat ac, adipiscing vitae, felis. Curabitur dictum gravida mauris.';
    const right = 'Quisque ullamcorper placerat ipsum. Cras nibh. Morbi vel justo vitae lacus tincidunt ultrices.';
    expect(page).toContain(left);
    expect(page).toContain(right);
    // The foot of the left column runs on to the head of the right one.
    expect(page).toContain('Vivamus viverra fermentum felis. Donec nonummy pellentesque ante. Phasellus adipiscing semper elit.');
    expect(page.indexOf('Two-Column Document with Lorem Ipsum')).toBe(0);
    expect(document.title).toBe('Two-Column Document with Lorem Ipsum');
    expect(document.pages[0]?.headings?.map((heading) => heading.text)).toContain('Abstract');
  });
});

/** A letter-size page of Helvetica text. */
function textPage(paragraphs: string[], size = 14): { width: number; height: number; lines: TextLineSpec[] } {
  const lines: TextLineSpec[] = [];
  let y = 90;
  for (const paragraph of paragraphs) {
    for (const line of wrapText(paragraph, 468, size)) {
      lines.push({ text: line, x: 72, y, size });
      y += size * 1.4;
    }
    y += size;
  }
  return { width: 612, height: 792, lines };
}

/** An image-only page: `page` of a text PDF rendered at 150 dpi, wrapped as a greyscale scan. */
async function scannedPage(paragraphs: string[]): Promise<{ width: number; height: number; image: { width: number; height: number; pixels: Uint8Array } }> {
  const doc = await openPdf(writePdf([textPage(paragraphs)]));
  try {
    const png = await renderPdfPage(doc, 1, 150);
    const { data, info } = await sharp(png).greyscale().raw().toBuffer({ resolveWithObject: true });
    return { width: 612, height: 792, image: { width: info.width, height: info.height, pixels: new Uint8Array(data) } };
  } finally {
    await doc.destroy();
  }
}

describe('scanned pages and images (real PP-OCRv4 through the engine)', () => {
  const SCANNED = 'The harbour pilots of Velmora guide cargo ships through the northern channel every morning.';
  let scanPdf: Uint8Array;

  beforeAll(async () => {
    scanPdf = writePdf([textPage(['Page one keeps a real text layer about the fish market of Velmora.']), await scannedPage([SCANNED])]);
  });

  it('auto: the image-only page 2 is rendered and OCR\'d (ocr: true), page 1 keeps its text layer', async () => {
    const seen: { page: number; ocr: boolean }[] = [];
    const local = new DocumentParser(engine, { onPage: (info) => seen.push({ page: info.page, ocr: info.ocr }) });
    try {
      const document = ok(await local.parse({ uri: 'scan.pdf', bytes: scanPdf }));
      expect(document.pages.map((page) => [page.page, page.ocr])).toEqual([
        [1, false],
        [2, true],
      ]);
      expect(document.pages[0]?.text).toBe('Page one keeps a real text layer about the fish market of Velmora.');
      expect(document.pages[1]?.ocrReason).toBe('no-text');
      expect(wordRecall(document.pages[1]?.text ?? '', SCANNED)).toBeGreaterThanOrEqual(0.9);
      expect(document.pages[1]?.text).toMatch(/Velmora/);
      expect(seen.sort((a, b) => a.page - b.page)).toEqual([
        { page: 1, ocr: false },
        { page: 2, ocr: true },
      ]);
    } finally {
      await local.close();
    }
  }, 180_000);

  it('never: the scanned page stays empty, marked ocr: false with the reason it would have been read', async () => {
    const local = new DocumentParser(engine, { ocr: 'never' });
    try {
      const document = ok(await local.parse({ uri: 'scan.pdf', bytes: scanPdf }));
      expect(document.pages[1]).toEqual({ page: 2, text: '', ocr: false, headings: [], ocrReason: 'no-text' });
      expect(document.pages[0]?.ocr).toBe(false);
    } finally {
      await local.close();
    }
  });

  it('never: a document with no text at all (an image file, a fully scanned PDF) fails alone as DOCUMENT_EMPTY, naming OCR as off', async () => {
    const local = new DocumentParser(engine, { ocr: 'never' });
    try {
      const scanOnly = writePdf([await scannedPage([SCANNED])]);
      const doc = await openPdf(writePdf([textPage([SCANNED])]));
      const png = await renderPdfPage(doc, 1, 150).finally(() => doc.destroy());
      for (const [uri, bytes] of [['scan-only.pdf', scanOnly], ['photo.png', png]] as const) {
        const failed = failure(await local.parse({ uri, bytes }));
        expect(failed.code).toBe('DOCUMENT_EMPTY');
        expect(failed.reason).toContain('ocr: never');
      }
      // A text PDF with one scanned page still succeeds, its text page read.
      expect(ok(await local.parse({ uri: 'scan.pdf', bytes: scanPdf })).pages[0]?.text).toMatch(/fish market/);
    } finally {
      await local.close();
    }
  });

  it('always: text pages are OCR\'d too', async () => {
    const local = new DocumentParser(engine, { ocr: 'always' });
    try {
      const document = ok(await local.parse({ uri: 'scan.pdf', bytes: scanPdf }));
      expect(document.pages.map((page) => page.ocr)).toEqual([true, true]);
      expect(document.pages[0]?.text).toMatch(/fish market/);
    } finally {
      await local.close();
    }
  }, 180_000);

  it('a PNG image file (even named .pdf) is OCR\'d as a one-page image document', async () => {
    const doc = await openPdf(writePdf([textPage(['Tide tables for the week of the regatta.'])]));
    const png = await renderPdfPage(doc, 1, 150);
    await doc.destroy();
    const path = join(workDir, 'photo.pdf');
    writeFileSync(path, png);
    const document = ok(await parser.parse({ uri: path, path }));
    expect(document.type).toBe('image');
    expect(document.pages).toHaveLength(1);
    expect(document.pages[0]?.ocr).toBe(true);
    expect(wordRecall(document.pages[0]?.text ?? '', 'Tide tables for the week of the regatta.')).toBeGreaterThanOrEqual(0.85);
  }, 180_000);
});

describe('image formats and the README sample folder', () => {
  it('JPEG, TIFF and WebP files are recognized by content (all named .bin) and OCR\'d', async () => {
    const doc = await openPdf(writePdf([textPage(['Ferry to Ostmund leaves at noon.'])]));
    const png = await renderPdfPage(doc, 1, 150);
    await doc.destroy();
    const formats = { jpeg: await sharp(png).jpeg().toBuffer(), tiff: await sharp(png).tiff().toBuffer(), webp: await sharp(png).webp().toBuffer() };
    for (const [format, data] of Object.entries(formats)) {
      const path = join(workDir, `${format}.bin`);
      writeFileSync(path, data);
      const document = ok(await parser.parse({ uri: path, path }));
      expect(document.type, format).toBe('image');
      expect(document.pages[0]?.ocr, format).toBe(true);
      expect(wordRecall(document.pages[0]?.text ?? '', 'Ferry to Ostmund leaves at noon.'), format).toBeGreaterThanOrEqual(0.8);
    }
  }, 180_000);

  it('a multi-page TIFF gives one OCR\'d page per TIFF page; a damaged image fails as DOCUMENT_CORRUPT', async () => {
    const lines = ['Ferry to Ostmund leaves at noon.', 'Tide tables for the week of the regatta.'];
    const pngs: Buffer[] = [];
    for (const line of lines) {
      const doc = await openPdf(writePdf([textPage([line])]));
      pngs.push(Buffer.from(await renderPdfPage(doc, 1, 150)));
      await doc.destroy();
    }
    const tiff = await sharp(pngs, { join: { animated: true } }).tiff().toBuffer();
    expect((await sharp(tiff).metadata()).pages).toBe(2);
    const path = join(workDir, 'scan.tif');
    writeFileSync(path, tiff);
    const document = ok(await parser.parse({ uri: path, path }));
    expect(document.pages.map((page) => [page.page, page.ocr])).toEqual([
      [1, true],
      [2, true],
    ]);
    lines.forEach((line, i) => expect(wordRecall(document.pages[i]?.text ?? '', line), line).toBeGreaterThanOrEqual(0.8));
    // A PNG cut short: the engine cannot decode it, which is a damaged document (its old rows go), not a bad request.
    const broken = join(workDir, 'broken.png');
    writeFileSync(broken, pngs[0]?.subarray(0, 400) ?? Buffer.alloc(0));
    const outcome = await parser.parse({ uri: broken, path: broken });
    expect(outcome).toMatchObject({ ok: false, code: 'DOCUMENT_CORRUPT' });
  }, 180_000);

  it('examples/docs parses: two text PDFs with headings, the scanned notice through OCR, the Markdown guide', async () => {
    const dir = join(REPO_ROOT, 'examples', 'docs');
    const parse = async (name: string): Promise<ParsedDocument> => ok(await parser.parse({ uri: name, path: join(dir, name) }));
    const pilotage = await parse('velmora-pilotage.pdf');
    expect(pilotage.title).toBe('Harbour pilotage at Velmora');
    expect(pilotage.pages.every((page) => !page.ocr)).toBe(true);
    expect(pilotage.pages.flatMap((page) => page.headings ?? []).map((heading) => heading.text)).toEqual([
      'Harbour pilotage at Velmora',
      'Boarding and the outer buoy',
      'Tidal windows',
      'Fees',
    ]);
    expect(flat(pilotage.pages.map((page) => page.text).join(' '))).toContain('Pilots board at the Velmora Outer Buoy, a red and white safe-water mark two miles west of the breakwater.');
    const market = await parse('ostmund-fish-market.pdf');
    expect(flat(market.pages[0]?.text ?? '')).toContain('A box found above four degrees at the landing check is set aside');
    const notice = await parse('notice-14-dredging-scan.pdf');
    expect(notice.pages).toHaveLength(1);
    expect(notice.pages[0]).toMatchObject({ page: 1, ocr: true, ocrReason: 'no-text' });
    expect(wordRecall(notice.pages[0]?.text ?? '', 'Ships must pass the dredger at slow speed and keep to the south side of the channel.')).toBeGreaterThanOrEqual(0.85);
    const guide = await parse('pilot-boat-maintenance.md');
    expect(guide.type).toBe('markdown');
    expect(guide.pages[0]?.headings?.map((heading) => heading.text)).toEqual(['Pilot boat maintenance guide', 'Daily checks', 'Weekly work', 'Winter lay-up', 'Records']);
    const total = readdirSync(dir).reduce((sum, name) => sum + readFileSync(join(dir, name)).length, 0);
    expect(total).toBeLessThan(300 * 1024);
  }, 180_000);
});

describe('HTML, Markdown and text files', () => {
  it('reads each by content, with headings and titles; a PDF named .txt is still a PDF', async () => {
    const files: Record<string, string | Uint8Array> = {
      'page.html': '<!doctype html><html><head><title>Harbour</title><script>bad()</script></head><body><h1>Pilots</h1><p>Board at the <b>outer</b> buoy.</p></body></html>',
      'notes.md': '# Fish market\n\nOpens at four.\n\n## Prices\n\nCod is cheap today.\n',
      'notes.txt': '# not a heading in plain text\nline two\n',
      'really-a-pdf.txt': writePdf([textPage(['A PDF wearing a text file name.'])], { title: 'Disguised' }),
    };
    for (const [name, content] of Object.entries(files)) writeFileSync(join(workDir, name), content);
    const parse = (name: string): Promise<ParseOutcome> => parser.parse({ uri: name, path: join(workDir, name) });
    const html = ok(await parse('page.html'));
    expect(html).toMatchObject({ type: 'html', title: 'Harbour', pages: [{ page: 1, text: 'Pilots\n\nBoard at the outer buoy.', ocr: false, headings: [{ offset: 0, text: 'Pilots' }] }] });
    const markdown = ok(await parse('notes.md'));
    expect(markdown.type).toBe('markdown');
    expect(markdown.title).toBe('Fish market');
    expect(markdown.pages[0]?.text).toBe(files['notes.md']);
    expect(markdown.pages[0]?.headings).toEqual([
      { offset: 2, text: 'Fish market' },
      { offset: 34, text: 'Prices' },
    ]);
    const text = ok(await parse('notes.txt'));
    expect(text).toMatchObject({ type: 'text', pages: [{ page: 1, text: files['notes.txt'], headings: [] }] });
    expect(text.title).toBeUndefined();
    const pdf = ok(await parse('really-a-pdf.txt'));
    expect(pdf.type).toBe('pdf');
    expect(pdf.title).toBe('Disguised');
    expect(pdf.pages[0]?.text).toBe('A PDF wearing a text file name.');
  });

  it('inline text records (JSON Lines {"id","text"}) hash their UTF-8 bytes and keep their id', async () => {
    const document = ok(await parser.parse({ uri: 'stdin#7', id: '7', text: 'Grüße aus dem Hafen' }));
    expect(document).toMatchObject({ id: '7', type: 'text', bytes: 21, pages: [{ page: 1, text: 'Grüße aus dem Hafen', ocr: false }] });
    const { createHash } = await import('node:crypto');
    expect(document.contentHash).toBe(createHash('sha256').update('Grüße aus dem Hafen').digest('hex'));
  });
});

describe('bad documents fail alone, each with its own code', () => {
  it('corrupt, truncated, empty, unsupported, missing and over-limit documents; the parser keeps going', async () => {
    const good = writePdf([textPage(['A perfectly good page.']), textPage(['And a second one.'])]);
    const cases: { name: string; content?: Uint8Array | string; code: string; options?: { maxBytes?: number; maxPages?: number } }[] = [
      { name: 'truncated.pdf', content: good.subarray(0, Math.floor(good.length / 3)), code: ErrorCode.DOCUMENT_CORRUPT },
      { name: 'garbage.pdf', content: '%PDF-1.4\nthis is not a pdf body at all\n', code: ErrorCode.DOCUMENT_CORRUPT },
      { name: 'empty.txt', content: '', code: ErrorCode.DOCUMENT_EMPTY },
      { name: 'blank.md', content: '  \n\n  \n', code: ErrorCode.DOCUMENT_EMPTY },
      { name: 'archive.zip', content: new Uint8Array([0x50, 0x4b, 0x03, 0x04, 1, 2, 3, 4]), code: ErrorCode.UNSUPPORTED_DOCUMENT },
      { name: 'missing.txt', code: ErrorCode.NOT_FOUND },
      { name: 'big.pdf', content: good, code: ErrorCode.DOCUMENT_TOO_LARGE, options: { maxBytes: 1000 } },
      { name: 'long.pdf', content: good, code: ErrorCode.DOCUMENT_TOO_LARGE, options: { maxPages: 1 } },
    ];
    for (const entry of cases) {
      const path = join(workDir, entry.name);
      if (entry.content !== undefined) writeFileSync(path, entry.content);
      const local = entry.options === undefined ? parser : new DocumentParser(engine, entry.options);
      try {
        const outcome = failure(await local.parse({ uri: entry.name, path }));
        expect(outcome.code, `${entry.name}: ${outcome.reason}`).toBe(entry.code);
        expect(outcome.reason.length).toBeGreaterThan(10);
      } finally {
        if (local !== parser) await local.close();
      }
      // The same parser reads a good document right after each failure.
      expect(ok(await parser.parse({ uri: 'good.pdf', bytes: good })).pages).toHaveLength(2);
    }
  });

  it('a scanned page where OCR finds nothing leaves the document empty (DOCUMENT_EMPTY)', async () => {
    const white = { width: 612, height: 792, image: { width: 200, height: 260, pixels: new Uint8Array(200 * 260).fill(255) } };
    const outcome = failure(await parser.parse({ uri: 'white.pdf', bytes: writePdf([white]) }));
    expect(outcome.code).toBe(ErrorCode.DOCUMENT_EMPTY);
  }, 120_000);

  it('a parse thread that crashes (out of memory) fails only its document; the next one gets a fresh thread', async (ctx) => {
    if (!sharedAvailable(PDF_DIR)) ctx.skip(missingReason(PDF_DIR));
    // pdfjs cannot even load in 48 MiB of heap; a text file can be read in it.
    const local = new DocumentParser(engine, { threads: 1, threadMemoryMb: 48 });
    try {
      const crashed = failure(await local.parse({ uri: TWO_COLUMNS, path: join(PDF_DIR, TWO_COLUMNS) }));
      expect(crashed.code).toBe(ErrorCode.INTERNAL);
      expect(crashed.reason).toMatch(/parse thread .*(crashed|exited)/);
      const after = ok(await local.parse({ uri: 'after.txt', text: 'the next document is read' }));
      expect(after.pages[0]?.text).toBe('the next document is read');
    } finally {
      await local.close();
    }
  });

  it('a document that keeps its thread busy past the step time limit fails with TIMEOUT; the thread is replaced', async () => {
    // 20,000 text runs of 240 characters on one page: seconds of pdfjs work (2.6 s on a 2-core
    // EPYC), a stand-in for a pathological file. Under the page's text-item limit on purpose: with
    // 200,000 one-word runs a fast machine reached that limit (DOCUMENT_TOO_LARGE) before 1 s.
    const lines = Array.from({ length: 20_000 }, (_, i) => ({ text: `w${i % 97} `.repeat(60), x: 10 + (i % 50) * 11, y: 10 + (Math.floor(i / 50) % 700), size: 1 }));
    const slow = writePdf([{ width: 612, height: 792, lines }]);
    const local = new DocumentParser(engine, { threads: 1, ocr: 'never', stepTimeoutMs: 500 });
    try {
      const timedOut = failure(await local.parse({ uri: 'slow.pdf', bytes: slow }));
      expect(timedOut.code).toBe(ErrorCode.TIMEOUT);
      expect(timedOut.reason).toMatch(/longer than 500 ms; the parse thread was stopped/);
      const after = ok(await local.parse({ uri: 'after', text: 'the next document is read' }));
      expect(after.pages[0]?.text).toBe('the next document is read');
    } finally {
      await local.close();
    }
  }, 120_000);

  it('a cancelled parse ends with CANCELLED', async () => {
    const controller = new AbortController();
    controller.abort();
    const local = new DocumentParser(engine, { signal: controller.signal });
    try {
      expect(failure(await local.parse({ uri: 'x', text: 'never read' })).code).toBe(ErrorCode.CANCELLED);
    } finally {
      await local.close();
    }
  });
});
