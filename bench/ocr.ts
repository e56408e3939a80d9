import { createRequire } from 'node:module';
import { availableParallelism } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { parseCatalog } from '../pipelines/inference/catalog.js';
import { InferenceEngine } from '../pipelines/inference/engine.js';
import { renderPage, type RenderedPage } from '../test/helpers/pdf-page.js';
import { wordF1 } from '../test/helpers/word-f1.js';
import { stageProfiler } from './lib/ocr-stages.js';
import { percentile, printTable, writeResult, type Row } from './lib/report.js';

/**
 * OCR speed and accuracy of the built-in PaddleOCR PP-OCRv4 model (paddleocr/pp-ocrv4) side by
 * side with the peer, tesseract.js 7 with its English data (single-threaded WASM, offline), on
 * pages of the PDFs in ../shared/data/pdfs. Each page is rendered once (pdftoppm when installed,
 * else pdfjs through the project's PDF reader) and both engines read the same PNG. Accuracy is
 * word-F1 against the page's own text layer (pdfjs text; test/helpers/word-f1.ts): a bag of
 * words, so column order does not count. Seconds per page are one recognize/extract call with the models
 * already loaded (rendering not counted); rounds are interleaved (round r: every page, Shoal then
 * the peer, the order flipped every other round) and the median per page is reported, because
 * the machine is shared and single timings are noisy. CPU seconds (process.cpuUsage over the
 * call: every thread of the process, the engine's and the peer's worker threads included) say
 * how much work a page took whatever else the machine was doing; tesseract.js uses one core,
 * Shoal's model threads use every core they are given.
 *
 *   npx tsx bench/ocr.ts [--dpi 150] [--rounds 3] [--pages stem:page,...] [--peer tesseract|none]
 *                        [--options '{"limitSideLen":1280}'] [--compare '{"fuseGraphs":false,"recMinWidth":320}']
 *                        [--threads N] [--renderer auto|pdftoppm|pdfjs] [--priority bulk|interactive]
 *   npx tsx bench/ocr.ts --scan [--rounds 3] [--pages …]   # the pages as one scan: pages/s against tesseract.js (1 worker, 1 per core)
 *   npx tsx bench/ocr.ts --stages [--rounds 3]   # where a page's time goes (bench/lib/ocr-stages.ts)
 *
 * Prints a table; writes bench/results/ocr-*.json.
 */

const HERE = fileURLToPath(new URL('.', import.meta.url));
const PDF_DIR = join(process.env.SHOAL_SHARED_DIR ?? resolve(HERE, '..', '..', 'shared'), 'data', 'pdfs');

/** The peer pages: Federal Register, SCOTUS, LibreOffice and Cupertino, page 1 each. */
const DEFAULT_PAGES = [
  'pdfplumber__federal-register-2020-17221:1',
  'pdfplumber__scotus-transcript-p1:1',
  '002-trivial-libre-office-writer__002-trivial-libre-office-writer:1',
  'pdfplumber__cupertino_usd_4-6-16:1',
].join(',');

const { values: args } = parseArgs({
  options: {
    dpi: { type: 'string', default: '150' },
    rounds: { type: 'string', default: '3' },
    pages: { type: 'string', default: DEFAULT_PAGES },
    peer: { type: 'string', default: 'tesseract' },
    /** Catalog options of a second Shoal reader, interleaved with the others (e.g. the old defaults). */
    compare: { type: 'string' },
    options: { type: 'string', default: '{}' },
    threads: { type: 'string' },
    renderer: { type: 'string', default: 'auto' },
    /**
     * Lane of Shoal's extract calls: unset = the engine's choice (one page = the interactive lane,
     * whose session has half the cores), 'bulk' = the primary session with every core.
     */
    priority: { type: 'string' },
    /** Instead: per-stage milliseconds of each page, shipped graphs + old strip minimum vs the defaults. */
    stages: { type: 'boolean', default: false },
    /**
     * Instead: the pages as one multi-page scan, pages/s — Shoal reads them in one extract call
     * (the bulk lane), tesseract.js with one worker (what `createWorker` gives) and with a
     * scheduler of one worker per core (both cores across pages, as Shoal uses them).
     */
    scan: { type: 'boolean', default: false },
  },
});

interface Reader {
  name: string;
  read(png: Uint8Array): Promise<string>;
  close(): Promise<void>;
}

const priority = args.priority === 'bulk' || args.priority === 'interactive' ? args.priority : undefined;

/** An engine serving the built-in OCR model as `ocr` with these options, loaded. */
async function ocrEngine(options: unknown, threads: number | undefined): Promise<InferenceEngine> {
  const engine = new InferenceEngine({
    catalog: parseCatalog({ models: { ocr: { source: 'paddleocr/pp-ocrv4', options } } }, 'bench'),
    ...(threads === undefined ? {} : { runtime: { intraOpThreads: threads } }),
  });
  await engine.preload('ocr');
  return engine;
}

/** A tesseract.js 7 worker with @tesseract.js-data/eng, offline: the language data is read from node_modules. */
async function tesseractWorker(): Promise<import('tesseract.js').Worker> {
  const { createWorker } = await import('tesseract.js');
  const langPath = join(dirname(createRequire(import.meta.url).resolve('@tesseract.js-data/eng/package.json')), '4.0.0');
  return createWorker('eng', 1, { langPath, gzip: true, cacheMethod: 'none' });
}

async function shoalReader(name: string, options: unknown, threads: number | undefined): Promise<Reader> {
  const engine = await ocrEngine(options, threads);
  return {
    name,
    async read(png) {
      const result = await engine.extract({ model: 'ocr', items: [{ image: png }], ...(priority === undefined ? {} : { priority }) });
      return result.items[0]?.text ?? '';
    },
    close: () => engine.close(),
  };
}

async function tesseractReader(): Promise<Reader> {
  const worker = await tesseractWorker();
  return {
    name: 'tesseract.js',
    async read(png) {
      const { data } = await worker.recognize(Buffer.from(png));
      return data.text;
    },
    close: async () => {
      await worker.terminate();
    },
  };
}

/** A reader of a whole scan: every page's text, in page order. */
interface ScanReader {
  name: string;
  read(pngs: readonly Uint8Array[]): Promise<string[]>;
  close(): Promise<void>;
}

async function shoalScanReader(options: unknown, threads: number | undefined): Promise<ScanReader> {
  const engine = await ocrEngine(options, threads);
  return {
    name: 'shoal (one extract call, bulk lane)',
    async read(pngs) {
      const result = await engine.extract({ model: 'ocr', items: pngs.map((image) => ({ image })), priority: 'bulk' });
      return result.items.map((item) => item.text ?? '');
    },
    close: () => engine.close(),
  };
}

/** tesseract.js with `workers` workers behind its scheduler (one worker: pages one after another). */
async function tesseractScanReader(workers: number): Promise<ScanReader> {
  const { createScheduler } = await import('tesseract.js');
  const scheduler = createScheduler();
  for (let worker = 0; worker < workers; worker++) scheduler.addWorker(await tesseractWorker());
  return {
    name: `tesseract.js (${workers} worker${workers === 1 ? '' : 's'})`,
    async read(pngs) {
      const results = await Promise.all(pngs.map((png) => scheduler.addJob('recognize', Buffer.from(png))));
      return results.map((result) => result.data.text);
    },
    close: async () => {
      await scheduler.terminate();
    },
  };
}

/** Pages/s of each reader over the pages as one scan, interleaved rounds, medians. */
async function scan(pages: readonly Page[], rounds: number, options: unknown, threads: number | undefined): Promise<void> {
  const readers = [await shoalScanReader(options, threads)];
  if (args.peer === 'tesseract') readers.push(await tesseractScanReader(1), await tesseractScanReader(availableParallelism()));
  const pngs = pages.map((page) => page.png);
  const seconds = new Map<string, number[]>();
  const cpuSeconds = new Map<string, number[]>();
  const texts = new Map<string, string[]>();
  try {
    for (const reader of readers) await reader.read(pngs.slice(0, 1));
    for (let round = 0; round < rounds; round++) {
      for (const reader of round % 2 === 0 ? readers : [...readers].reverse()) {
        const started = performance.now();
        const cpuBefore = process.cpuUsage();
        const read = await reader.read(pngs);
        const cpu = process.cpuUsage(cpuBefore);
        const elapsed = (performance.now() - started) / 1000;
        if (read.length !== pages.length) throw new Error(`${reader.name} returned ${read.length} pages of ${pages.length}`);
        seconds.set(reader.name, [...(seconds.get(reader.name) ?? []), elapsed]);
        cpuSeconds.set(reader.name, [...(cpuSeconds.get(reader.name) ?? []), (cpu.user + cpu.system) / 1e6]);
        texts.set(reader.name, read);
        console.error(`round ${round + 1}: ${reader.name} ${elapsed.toFixed(2)} s`);
      }
    }
  } finally {
    for (const reader of readers) await reader.close();
  }
  const shoalSeconds = median(seconds.get(readers[0]?.name ?? '') ?? []);
  const rows: Row[] = readers.map((reader) => {
    const wall = median(seconds.get(reader.name) ?? []);
    const read = texts.get(reader.name) ?? [];
    const f1 = pages.map((page, index) => wordF1(read[index] ?? '', page.text).f1 * 100);
    return {
      reader: reader.name,
      'scan s (median)': Number(wall.toFixed(2)),
      'pages/s': Number((pages.length / wall).toFixed(3)),
      'CPU s': Number(median(cpuSeconds.get(reader.name) ?? []).toFixed(2)),
      'Shoal pages/s ÷ this': Number((wall / shoalSeconds).toFixed(2)),
      'word-F1 % per page': f1.map((value) => value.toFixed(1)).join(' / '),
    };
  });
  printTable(`OCR of ${pages.length} pages as one scan at 150 dpi, median of ${rounds} interleaved rounds`, rows);
  const file = writeResult('ocr-scan', { rounds, pages: pages.map((page) => `${page.pdf}:${page.page}`), readers: rows, seconds: Object.fromEntries(seconds), cpuSeconds: Object.fromEntries(cpuSeconds) });
  console.log(`\nwritten: ${file}`);
}

interface Page extends RenderedPage {
  pdf: string;
  page: number;
}

const median = (values: readonly number[]): number => percentile(values, 50);

/** Per-stage milliseconds (median over rounds, interleaved) for the shipped and the fused graphs. */
async function stages(pages: readonly Page[], rounds: number, threads: number): Promise<void> {
  const variants = [
    { name: 'before (shipped graphs, strips ≥ 320, every strip classified)', profiler: await stageProfiler({ fuse: false, minWidth: 320, threads, clsSample: 0 }) },
    { name: 'now (fused graphs, strips ≥ 128, 16 strips classified first)', profiler: await stageProfiler({ fuse: true, minWidth: 128, threads, clsSample: 16 }) },
  ];
  const samples = new Map<string, Record<string, number>[]>();
  try {
    for (const variant of variants) await variant.profiler.profile(pages[0]?.png ?? new Uint8Array());
    for (let round = 0; round < rounds; round++) {
      for (const page of pages) {
        for (const variant of round % 2 === 0 ? variants : [...variants].reverse()) {
          const key = `${variant.name}|${page.pdf}`;
          samples.set(key, [...(samples.get(key) ?? []), await variant.profiler.profile(page.png)]);
        }
      }
    }
  } finally {
    for (const variant of variants) await variant.profiler.release();
  }
  const rows: Row[] = [];
  for (const page of pages) {
    for (const variant of variants) {
      const runs = samples.get(`${variant.name}|${page.pdf}`) ?? [];
      const row: Row = { variant: variant.name, document: page.pdf.replace(/^pdfplumber__|__.*$/g, '') };
      for (const stage of Object.keys(runs[0] ?? {})) row[stage] = Math.round(median(runs.map((r) => r[stage] ?? 0)));
      row.total = Math.round(median(runs.map((r) => Object.entries(r).filter(([k]) => !['boxes_found', 'rec_columns'].includes(k)).reduce((a, [, v]) => a + v, 0))));
      rows.push(row);
    }
  }
  printTable(`OCR stages, ms per page (median of ${rounds} interleaved rounds, ${threads} intra-op threads, one thread for the rest)`, rows);
  console.log(`\nwritten: ${writeResult('ocr-stages', { rounds, threads, pages: rows })}`);
}

async function main(): Promise<void> {
  const dpi = Number(args.dpi);
  const rounds = Math.max(1, Number(args.rounds));
  const options: unknown = JSON.parse(args.options);
  const renderer = args.renderer === 'pdftoppm' || args.renderer === 'pdfjs' ? args.renderer : 'auto';
  const pages: Page[] = [];
  for (const entry of args.pages.split(',')) {
    const [pdf = '', pageText = '1'] = entry.split(':');
    const page = Number(pageText);
    pages.push({ pdf, page, ...(await renderPage(join(PDF_DIR, `${pdf}.pdf`), page, dpi, renderer)) });
  }
  const threads = args.threads === undefined ? undefined : Number(args.threads);
  if (args.stages) {
    await stages(pages, rounds, threads ?? availableParallelism());
    return;
  }
  if (args.scan) {
    await scan(pages, rounds, options, threads);
    return;
  }
  const readers = [await shoalReader('shoal', options, threads)];
  if (args.compare !== undefined) readers.push(await shoalReader(`shoal ${args.compare}`, JSON.parse(args.compare), threads));
  if (args.peer === 'tesseract') readers.push(await tesseractReader());
  const seconds = new Map<string, number[]>();
  const cpuSeconds = new Map<string, number[]>();
  const texts = new Map<string, string>();
  try {
    // One untimed read each: first-call costs (shape caches, WASM start-up) are not a page's cost.
    for (const reader of readers) await reader.read(pages[0]?.png ?? new Uint8Array());
    for (let round = 0; round < rounds; round++) {
      for (const page of pages) {
        const order = round % 2 === 0 ? readers : [...readers].reverse();
        for (const reader of order) {
          const started = performance.now();
          const cpuBefore = process.cpuUsage();
          const text = await reader.read(page.png);
          const cpu = process.cpuUsage(cpuBefore);
          const elapsed = (performance.now() - started) / 1000;
          const key = `${reader.name}|${page.pdf}:${page.page}`;
          seconds.set(key, [...(seconds.get(key) ?? []), elapsed]);
          cpuSeconds.set(key, [...(cpuSeconds.get(key) ?? []), (cpu.user + cpu.system) / 1e6]);
          texts.set(key, text);
          console.error(`round ${round + 1}: ${reader.name} ${page.pdf} p${page.page} ${elapsed.toFixed(2)} s`);
        }
      }
    }
  } finally {
    for (const reader of readers) await reader.close();
  }
  const rows: Row[] = [];
  for (const page of pages) {
    for (const reader of readers) {
      const key = `${reader.name}|${page.pdf}:${page.page}`;
      const text = texts.get(key) ?? '';
      const f1 = wordF1(text, page.text);
      rows.push({
        engine: reader.name,
        document: page.pdf.replace(/^pdfplumber__|__.*$/g, ''),
        page: page.page,
        's/page (median)': Number(median(seconds.get(key) ?? []).toFixed(2)),
        'CPU s/page': Number(median(cpuSeconds.get(key) ?? []).toFixed(2)),
        'word-F1 %': Number((f1.f1 * 100).toFixed(1)),
        words: `${f1.common}/${f1.referenceWords}`,
      });
    }
  }
  const renderers = [...new Set(pages.map((p) => p.renderer))].join(',');
  printTable(`OCR at ${dpi} dpi (${renderers}), median of ${rounds} interleaved rounds, options ${JSON.stringify(options)}, lane ${priority ?? 'engine default'}`, rows);
  const file = writeResult('ocr', { dpi, rounds, renderer: renderers, options, priority: priority ?? null, pages: rows, seconds: Object.fromEntries(seconds), cpuSeconds: Object.fromEntries(cpuSeconds) });
  console.log(`\nwritten: ${file}`);
}

await main();
