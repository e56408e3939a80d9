import { readdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import type { Engine } from '../adapters/protocol/engine.js';
import { ErrorCode, ShoalError } from '../adapters/protocol/errors.js';
import type { ExtractResult } from '../adapters/protocol/results.js';
import type { ParseOptions } from '../pipelines/documents/document.js';
import { DocumentParser } from '../pipelines/documents/parse.js';
import { printTable, writeResult, type Row } from './lib/report.js';

/**
 * Parse speed of text PDFs: every PDF of ../shared/data/pdfs (the encrypted one fails at once and
 * is not counted), read by the parse stage with its pool of parse threads, documents handed over
 * `--concurrency` at a time as a run does. Pages/s over the whole set, per configuration:
 *
 * - `never`: the text layer only (what a text PDF costs);
 * - `auto`: as `never` plus the OCR routing (image coverage of sparse pages). Pages routed to OCR
 *   are counted, but the OCR itself is replaced by an engine that answers at once with no text, so
 *   the figure is parsing alone (OCR speed is bench/ocr.ts's business).
 *
 * Thread start-up (tsx + pdfjs import) is paid by a warm-up document before timing.
 *
 *   npx tsx bench/parse.ts [--threads 1,2] [--repeat 3] [--concurrency 4]
 */

const HERE = fileURLToPath(new URL('.', import.meta.url));
const PDF_DIR = join(process.env.SHOAL_SHARED_DIR ?? resolve(HERE, '..', '..', 'shared'), 'data', 'pdfs');

const { values: args } = parseArgs({
  options: {
    threads: { type: 'string', default: '1,2' },
    repeat: { type: 'string', default: '3' },
    concurrency: { type: 'string', default: '4' },
  },
});

/** An engine whose OCR reads nothing, instantly: it counts what the parser routed to OCR. */
class CountingOcrEngine implements Engine {
  ocrPages = 0;
  extract(): Promise<ExtractResult> {
    this.ocrPages++;
    const result: ExtractResult = { model: 'none', items: [{ index: 0, text: '' }], usage: { items: 1, tokens: 0 } };
    return Promise.resolve(result);
  }
  encode(): never {
    throw new ShoalError(ErrorCode.UNSUPPORTED_OPERATION, 'bench engine: OCR only');
  }
  score(): never {
    throw new ShoalError(ErrorCode.UNSUPPORTED_OPERATION, 'bench engine: OCR only');
  }
  tokenize(): never {
    throw new ShoalError(ErrorCode.UNSUPPORTED_OPERATION, 'bench engine: OCR only');
  }
  close(): Promise<void> {
    return Promise.resolve();
  }
}

async function runAll(parser: DocumentParser, files: readonly string[], concurrency: number): Promise<{ pages: number; failed: string[] }> {
  let next = 0;
  let pages = 0;
  const failed: string[] = [];
  const worker = async (): Promise<void> => {
    while (next < files.length) {
      const file = files[next++];
      if (file === undefined) break;
      const outcome = await parser.parse({ uri: file, path: join(PDF_DIR, file) });
      if (outcome.ok) pages += outcome.document.pages.length;
      else failed.push(`${file}: ${outcome.code}`);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  return { pages, failed };
}

async function main(): Promise<void> {
  // Largest first, so the 117-page document does not start last and run alone.
  const files = readdirSync(PDF_DIR)
    .filter((name) => name.endsWith('.pdf'))
    .sort((a, b) => (b.startsWith('009') ? 1 : 0) - (a.startsWith('009') ? 1 : 0) || a.localeCompare(b));
  const repeat = Number(args.repeat);
  const concurrency = Number(args.concurrency);
  const rows: Row[] = [];
  for (const threads of args.threads.split(',').map(Number)) {
    for (const ocr of ['never', 'auto'] as const satisfies readonly ParseOptions['ocr'][]) {
      const engine = new CountingOcrEngine();
      const parser = new DocumentParser(engine, { threads, ocr });
      try {
        // Warm-up: start every thread (tsx loader + pdfjs import) before timing.
        await runAll(parser, files.filter((name) => name.startsWith('001') || name.startsWith('002')), threads);
        const times: number[] = [];
        let result = { pages: 0, failed: [] as string[] };
        engine.ocrPages = 0;
        for (let run = 0; run < repeat; run++) {
          const started = performance.now();
          result = await runAll(parser, files, concurrency);
          times.push((performance.now() - started) / 1000);
        }
        times.sort((a, b) => a - b);
        const median = times[Math.floor(times.length / 2)] ?? Number.NaN;
        rows.push({
          threads,
          ocr,
          documents: files.length - result.failed.length,
          failed: result.failed.length,
          pages: result.pages,
          'ocr pages/run': engine.ocrPages / repeat,
          'median s': median,
          'best s': times[0] ?? Number.NaN,
          'pages/s (median)': result.pages / median,
        });
      } finally {
        await parser.close();
      }
    }
  }
  printTable(`Text-PDF parsing, ${PDF_DIR} (median of ${repeat} runs, ${concurrency} documents in flight)`, rows);
  console.log(`\nwrote ${writeResult('parse', { rows, repeat, concurrency })}`);
}

await main();
