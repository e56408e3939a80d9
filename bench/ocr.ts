import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { parseCatalog } from '../pipelines/inference/catalog.js';
import { InferenceEngine } from '../pipelines/inference/engine.js';
import { characterErrorRate } from '../test/helpers/text-distance.js';
import { printTable, writeResult, type Row } from './lib/report.js';

/**
 * OCR accuracy and speed of the built-in PaddleOCR PP-OCRv4 model (paddleocr/pp-ocrv4) on pages
 * of the PDFs in ../shared/data/pdfs: each page is rendered with pdftoppm, read through the
 * engine, and compared with the PDF's own text layer (`pdftotext -layout`, which lays multi-column
 * text out row by row, the order OCR reads in). CER = Levenshtein distance / reference length,
 * after NFKC and whitespace normalization (test/helpers/text-distance.ts). Seconds per page are
 * the extract call alone (model loaded beforehand; rendering not counted).
 *
 *   npx tsx bench/ocr.ts [--dpi 150] [--pages pdf-stem:page,...] [--options '{"limitSideLen":1280}'] [--threads N]
 *
 * Needs poppler-utils (pdftoppm, pdftotext). Prints a table; writes bench/results/ocr-*.json.
 */

const HERE = fileURLToPath(new URL('.', import.meta.url));
const PDF_DIR = join(process.env.SHOAL_SHARED_DIR ?? resolve(HERE, '..', '..', 'shared'), 'data', 'pdfs');

/** Clean text pages first, then harder ones (small print, rules, math, German, dense tables). */
const DEFAULT_PAGES = [
  '001-trivial__minimal-document:1',
  '002-trivial-libre-office-writer__002-trivial-libre-office-writer:1',
  '004-pdflatex-4-pages__pdflatex-4-pages:1',
  '004-pdflatex-4-pages__pdflatex-4-pages:2',
  '006-pdflatex-outline__pdflatex-outline:2',
  '011-google-doc-document__google-doc-document:1',
  '021-pdfa__crazyones-pdfa:1',
  '026-latex-multicolumn__multicolumn:1',
  '026-latex-multicolumn__multicolumn:2',
  'pdfplumber__cupertino_usd_4-6-16:1',
  'pdfplumber__federal-register-2020-17221:1',
  'pdfplumber__scotus-transcript-p1:1',
  'pdfplumber__la-precinct-bulletin-2014-p1:1',
  'pdfplumber__WARN-Report-for-7-1-2015-to-03-25-2016:1',
  '009-pdflatex-geotopo__GeoTopo-komprimiert:10',
  'pdfplumber__senate-expenditures:1',
  'pdfplumber__nics-background-checks-2015-11:1',
].join(',');

const { values: args } = parseArgs({
  options: {
    dpi: { type: 'string', default: '150' },
    pages: { type: 'string', default: DEFAULT_PAGES },
    options: { type: 'string', default: '{}' },
    threads: { type: 'string' },
  },
});

function run(command: string, argv: string[]): string {
  const result = spawnSync(command, argv, { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  if (result.error !== undefined || result.status !== 0) {
    throw new Error(`${command} ${argv.join(' ')} failed: ${result.error?.message ?? result.stderr}`);
  }
  return result.stdout;
}

async function main(): Promise<void> {
  const dpi = Number(args.dpi);
  const options: unknown = JSON.parse(args.options);
  const work = mkdtempSync(join(tmpdir(), 'shoal-bench-ocr-'));
  const runtime = args.threads === undefined ? {} : { runtime: { intraOpThreads: Number(args.threads) } };
  const engine = new InferenceEngine({
    images: { roots: [work] },
    catalog: parseCatalog({ models: { ocr: { source: 'paddleocr/pp-ocrv4', options } } }, 'bench'),
    ...runtime,
  });
  const rows: Row[] = [];
  try {
    await engine.preload('ocr');
    let seconds = 0;
    for (const entry of args.pages.split(',')) {
      const [pdf = '', pageText = '1'] = entry.split(':');
      const page = Number(pageText);
      const file = join(PDF_DIR, `${pdf}.pdf`);
      const stem = join(work, `${pdf}-${page}`);
      run('pdftoppm', ['-r', String(dpi), '-f', String(page), '-l', String(page), '-singlefile', '-png', file, stem]);
      const reference = run('pdftotext', ['-layout', '-f', String(page), '-l', String(page), file, '-']);
      const started = performance.now();
      const result = await engine.extract({ model: 'ocr', items: [{ image: `${stem}.png` }] });
      const elapsed = (performance.now() - started) / 1000;
      seconds += elapsed;
      const item = result.items[0];
      const cer = characterErrorRate(item?.text ?? '', reference);
      rows.push({ document: pdf, page, 'CER %': Number((cer.cer * 100).toFixed(2)), edits: cer.distance, chars: cer.referenceLength, lines: item?.lines?.length ?? 0, seconds: Number(elapsed.toFixed(2)) });
      console.error(`${pdf} p${page}: CER ${(cer.cer * 100).toFixed(2)} % in ${elapsed.toFixed(1)} s`);
    }
    printTable(`PP-OCRv4 at ${dpi} dpi, options ${JSON.stringify(options)}: ${(rows.length / seconds).toFixed(3)} pages/s`, rows);
    const file = writeResult('ocr', { dpi, options, pagesPerSecond: rows.length / seconds, pages: rows });
    console.log(`\nwritten: ${file}`);
  } finally {
    await engine.close();
    rmSync(work, { recursive: true, force: true });
  }
}

await main();
