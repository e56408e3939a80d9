import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import * as lancedb from '@lancedb/lancedb';
import { z } from 'zod';
import { ensureBuiltCli, REPO } from './lib/cli-run.js';
import { BENCH_MODEL, DATA_DIR } from './lib/corpora.js';
import { printTable, writeResult, type Row } from './lib/report.js';

/**
 * `shoal ingest` against the stack a TypeScript team assembles instead (issue 41 item 1): LangChain.js's
 * PDFLoader + RecursiveCharacterTextSplitter + transformers.js embeddings + LanceDB, written the way
 * its documentation shows (bench/peers/langchain/ingest.mjs, its own pinned project:
 * `npm ci --prefix bench/peers/langchain`). Same machine, same run, same inputs (the PDFs of
 * ../shared/data/pdfs and the first N SciFact abstracts as `{"id","text"}` records, title + blank
 * line + abstract), same model (bench-minilm-l6, fp32, mean pooling, normalized), same chunk size
 * and overlap in the encoder's tokens (200 / 32, Shoal's defaults), both writing a fresh LanceDB
 * index. Each side is one child process per round, rounds interleaved with the order alternating;
 * wall time from spawn to exit (start-up included on both sides) and peak RSS (GNU time's maximum
 * resident set size of the process tree's largest member).
 *
 * PDF pages: how many pages of each file have text in each index is counted, against the page
 * count pdfinfo reports; files a loader fails on are listed (the password-protected sample fails on
 * both sides by design). Shoal OCRs pages that have no text layer (`--ocr auto`, the default); the
 * peer has no OCR, so its count of pages with text can be lower: that is work Shoal does and the
 * peer does not, and it is inside Shoal's time.
 *
 *   npx tsx bench/ingest-peer.ts [--rounds 3] [--docs 2000] [--skip-pdfs]
 */

const { values: args } = parseArgs({
  options: {
    rounds: { type: 'string', default: '3' },
    docs: { type: 'string', default: '2000' },
    'skip-pdfs': { type: 'boolean', default: false },
    build: { type: 'boolean', default: false },
  },
});

const PEER = join(REPO, 'bench', 'peers', 'langchain');
if (!existsSync(join(PEER, 'node_modules', '@langchain', 'community'))) {
  throw new Error(`the LangChain peer is not installed: run  ONNXRUNTIME_NODE_INSTALL=skip npm ci --ignore-scripts --prefix bench/peers/langchain`);
}
if (spawnSync('/usr/bin/time', ['-f', '%M', 'true']).status !== 0) throw new Error('GNU time (/usr/bin/time) is needed for peak RSS: apt-get install time');
ensureBuiltCli(args.build);

const rounds = Number(args.rounds);
const PDF_DIR = join(DATA_DIR, 'pdfs');
const work = mkdtempSync(join(tmpdir(), 'shoal-ingest-peer-'));
const records = join(work, 'records.jsonl');
const Abstract = z.object({ _id: z.string(), title: z.string(), text: z.string() });
const corpus = readFileSync(join(DATA_DIR, 'scifact', 'corpus.jsonl'), 'utf8').split('\n').filter((line) => line.trim() !== '');
const docs = corpus.slice(0, Number(args.docs)).map((line) => Abstract.parse(JSON.parse(line)));
writeFileSync(records, docs.map((doc) => JSON.stringify({ id: doc._id, text: `${doc.title}\n\n${doc.text}` })).join('\n') + '\n');
const catalog = join(work, 'catalog.json');
writeFileSync(catalog, JSON.stringify({ models: { bench: { source: BENCH_MODEL, precision: 'fp32' } } }));
const pdfs = args['skip-pdfs'] ? [] : readdirSync(PDF_DIR).filter((name) => name.toLowerCase().endsWith('.pdf')).sort();

/** Pages per PDF as pdfinfo reports them (0 where it cannot read the file, e.g. the encrypted one). */
const pagesOf = new Map(pdfs.map((name) => {
  const info = spawnSync('pdfinfo', [join(PDF_DIR, name)], { encoding: 'utf8' });
  const pages = /^Pages:\s+(\d+)/m.exec(info.stdout ?? '')?.[1];
  return [name, pages === undefined ? 0 : Number(pages)] as const;
}));
const totalPages = [...pagesOf.values()].reduce((sum, pages) => sum + pages, 0);

interface Measured {
  seconds: number;
  peakRssMb: number;
  chunks: number;
  pdfPagesWithText: number;
  pdfFilesFailed: string[];
}

/** Runs a command under GNU time: wall seconds from spawn to exit, peak RSS, stdout. */
function timedRun(command: string, argv: readonly string[], options: { stdin?: string; env?: NodeJS.ProcessEnv }): Promise<{ seconds: number; peakRssMb: number; stdout: string }> {
  return new Promise((resolve, reject) => {
    const rssFile = join(work, `rss-${process.hrtime.bigint()}`);
    const started = performance.now();
    const child = spawn('/usr/bin/time', ['-f', '%M', '-o', rssFile, command, ...argv], { stdio: [options.stdin === undefined ? 'ignore' : 'pipe', 'pipe', 'inherit'], env: { ...process.env, ...options.env } });
    let stdout = '';
    child.stdout?.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
    if (options.stdin !== undefined && child.stdin !== null) {
      child.stdin.end(readFileSync(options.stdin));
    }
    child.on('error', reject);
    child.on('close', (code) => {
      const seconds = (performance.now() - started) / 1000;
      const kb = Number(readFileSync(rssFile, 'utf8').trim().split('\n').pop());
      // Shoal exits 3 when some documents failed (the encrypted PDF): the run itself completed.
      if (code !== 0 && code !== 3) reject(new Error(`${command} ${argv.slice(0, 2).join(' ')} exited ${code}`));
      else resolve({ seconds, peakRssMb: kb / 1024, stdout });
    });
  });
}

const ShoalRow = z.object({ source: z.string(), page: z.number(), text: z.string() });

async function runShoal(round: number): Promise<Measured> {
  const index = join(work, `shoal-${round}`);
  const inputs = pdfs.length > 0 ? [PDF_DIR, '-'] : ['-'];
  const run = await timedRun(process.execPath, [join(REPO, 'bin', 'shoal.js'), 'ingest', ...inputs, '--index', index, '--model', 'bench', '--catalog', catalog, '--json', '--no-progress'], {
    stdin: records,
    env: { SHOAL_CACHE_DIR: join(work, 'cache') },
  });
  const db = await lancedb.connect(index);
  const table = await db.openTable('chunks');
  const rows = z.array(ShoalRow).parse(await table.query().select(['source', 'page', 'text']).toArray());
  table.close();
  db.close();
  const pages = new Set(rows.filter((row) => row.source.toLowerCase().endsWith('.pdf') && row.text.trim() !== '').map((row) => `${row.source}#${row.page}`));
  const pdfSources = new Set(rows.filter((row) => row.source.toLowerCase().endsWith('.pdf')).map((row) => row.source.split('/').pop() ?? ''));
  rmSync(index, { recursive: true, force: true });
  return { seconds: run.seconds, peakRssMb: run.peakRssMb, chunks: rows.length, pdfPagesWithText: pages.size, pdfFilesFailed: pdfs.filter((name) => !pdfSources.has(name)) };
}

const PeerResult = z.object({ chunks: z.number(), pdf_pages_with_text: z.number(), pdf_files_failed: z.array(z.object({ file: z.string(), error: z.string() })) });

async function runPeer(round: number): Promise<Measured> {
  const index = join(work, `peer-${round}`);
  const run = await timedRun(process.execPath, [join(PEER, 'ingest.mjs'), ...(pdfs.length > 0 ? ['--pdfs', PDF_DIR] : []), '--records', records, '--index', index, '--model', BENCH_MODEL, '--chunk-size', '200', '--chunk-overlap', '32'], {});
  const result = PeerResult.parse(JSON.parse(run.stdout.trim().split('\n').pop() ?? '{}'));
  rmSync(index, { recursive: true, force: true });
  return { seconds: run.seconds, peakRssMb: run.peakRssMb, chunks: result.chunks, pdfPagesWithText: result.pdf_pages_with_text, pdfFilesFailed: result.pdf_files_failed.map((failed) => `${failed.file}: ${failed.error}`) };
}

const documents = docs.length + pdfs.length;
const results: { round: number; shoal: Measured; peer: Measured }[] = [];
try {
  // One untimed Shoal run of a few records fills the model cache, as a deployed Shoal would have it.
  await timedRun(process.execPath, [join(REPO, 'bin', 'shoal.js'), 'ingest', '-', '--index', join(work, 'warm'), '--model', 'bench', '--catalog', catalog, '--no-progress'], { stdin: records, env: { SHOAL_CACHE_DIR: join(work, 'cache') } });
  for (let round = 0; round < rounds; round++) {
    const order = round % 2 === 0 ? (['shoal', 'peer'] as const) : (['peer', 'shoal'] as const);
    const measured: Partial<Record<'shoal' | 'peer', Measured>> = {};
    for (const side of order) measured[side] = side === 'shoal' ? await runShoal(round) : await runPeer(round);
    const { shoal, peer } = measured as Record<'shoal' | 'peer', Measured>;
    results.push({ round, shoal, peer });
    console.log(`round ${round + 1}: shoal ${shoal.seconds.toFixed(1)} s (${shoal.chunks} chunks), peer ${peer.seconds.toFixed(1)} s (${peer.chunks} chunks), docs/s ratio ${(peer.seconds / shoal.seconds).toFixed(2)}`);
  }
} finally {
  rmSync(work, { recursive: true, force: true });
}

const median = (values: number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? (sorted[mid] ?? Number.NaN) : ((sorted[mid - 1] ?? 0) + (sorted[mid] ?? 0)) / 2;
};
const rows: Row[] = results.flatMap(({ round, shoal, peer }) => [shoal, peer].map((m, i) => ({
  round: round + 1,
  stack: i === 0 ? 'shoal ingest' : 'LangChain.js peer',
  seconds: m.seconds,
  'docs/s': documents / m.seconds,
  chunks: m.chunks,
  'chunks/s': m.chunks / m.seconds,
  'peak RSS MB': Math.round(m.peakRssMb),
  'PDF pages with text': `${m.pdfPagesWithText}/${totalPages}`,
  'PDF files failed': m.pdfFilesFailed.length,
})));
printTable(`ingest: ${docs.length} SciFact records + ${pdfs.length} PDFs (${totalPages} pages), bench-minilm-l6 fp32, chunks of 200 tokens`, rows);
const ratios = results.map(({ shoal, peer }) => peer.seconds / shoal.seconds);
const summary = {
  documents,
  records: docs.length,
  pdf_files: pdfs.length,
  pdf_pages: totalPages,
  median_docs_per_s: { shoal: median(results.map((r) => documents / r.shoal.seconds)), peer: median(results.map((r) => documents / r.peer.seconds)) },
  median_chunks_per_s: { shoal: median(results.map((r) => r.shoal.chunks / r.shoal.seconds)), peer: median(results.map((r) => r.peer.chunks / r.peer.seconds)) },
  median_peak_rss_mb: { shoal: median(results.map((r) => r.shoal.peakRssMb)), peer: median(results.map((r) => r.peer.peakRssMb)) },
  docs_per_s_ratio: { rounds: ratios, median: median(ratios), target: 3 },
  failed_files: { shoal: results[0]?.shoal.pdfFilesFailed ?? [], peer: results[0]?.peer.pdfFilesFailed ?? [] },
  pdf_pages_with_text: { shoal: results.map((r) => r.shoal.pdfPagesWithText), peer: results.map((r) => r.peer.pdfPagesWithText), of: totalPages },
};
console.log(`\nShoal / peer documents/s: median ${summary.docs_per_s_ratio.median.toFixed(2)} (rounds ${ratios.map((r) => r.toFixed(2)).join(', ')}; target ≥ 3)`);
console.log(`wrote ${writeResult('ingest-peer', { rounds: results, summary })}`);
