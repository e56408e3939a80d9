import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { copyFile, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as lancedb from '@lancedb/lancedb';
import sharp from 'sharp';
import { afterAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { openPdf, renderPdfPage } from '../../adapters/documents/pdf-reader.js';
import { wrapText, writePdf, type PageSpec } from '../../adapters/documents/pdf-writer.js';
import { committedDocuments, summaryOf } from '../helpers/ingest-summary.js';
import { runShoal, SHOAL_BIN } from '../helpers/shoal-cli.js';
import { CONFORMANCE_DIR, DATA_DIR } from '../helpers/shared.js';
import { CLI_FROM_SOURCE } from '../helpers/cli-build.js';

/**
 * `shoal ingest` end to end: the real CLI as a child process, real files (two PDFs of the shared
 * kit and an encrypted one, text and Markdown), the real engine with bench-minilm-l6 (real MiniLM
 * tokenizer and geometry, random weights) and a real LanceDB index in a temp folder.
 */

const MODEL = join(CONFORMANCE_DIR, 'bench-minilm-l6');
const PDFS = join(DATA_DIR, 'pdfs');
const root = await mkdtemp(join(tmpdir(), 'shoal-ingest-'));
afterAll(() => rm(root, { recursive: true, force: true }));


const Row = z.object({
  id: z.string(), document_id: z.string(), source: z.string(), page: z.number(), chunk: z.number(), text: z.string(),
  start: z.number(), end: z.number(), heading: z.string().nullable(), settings: z.string(), ingested_at: z.string(),
  vector: z.custom<Iterable<number>>((value) => value !== null && typeof value === 'object' && Symbol.iterator in value).transform((value) => Array.from(value)),
});
type Row = z.infer<typeof Row>;

async function readRows(index: string, table = 'chunks'): Promise<Row[]> {
  const db = await lancedb.connect(index);
  const t = await db.openTable(table);
  const rows: unknown[] = await t.query().toArray();
  t.close();
  db.close();
  return rows.map((row) => Row.parse(row)).sort((a, b) => (a.id < b.id ? -1 : 1));
}

async function tableVersion(index: string): Promise<number> {
  const db = await lancedb.connect(index);
  const t = await db.openTable('chunks');
  const version = await t.version();
  t.close();
  db.close();
  return version;
}

const sha256 = (bytes: Uint8Array): string => createHash('sha256').update(bytes).digest('hex');

const paragraphs = (topic: string, n: number): string =>
  Array.from({ length: n }, (_, i) => `The ${topic} report, part ${i}, explains how ${topic} systems behave under load. It lists measured figures for case ${i}.`).join('\n\n');

const docs = join(root, 'docs');
await mkdir(docs);
await writeFile(join(docs, 'alpha.txt'), paragraphs('alpha', 12));
await writeFile(join(docs, 'beta.md'), `# Beta guide\n\nIntro text about beta.\n\n## Install\n\n${paragraphs('beta', 8)}\n`);
await writeFile(join(docs, 'gamma.txt'), 'Gamma is a single short note about lighthouses.');
await copyFile(join(PDFS, '004-pdflatex-4-pages__pdflatex-4-pages.pdf'), join(docs, 'four-pages.pdf'));
await copyFile(join(PDFS, '021-pdfa__crazyones-pdfa.pdf'), join(docs, 'crazyones.pdf'));
await copyFile(join(PDFS, '005-libreoffice-writer-password__libreoffice-writer-password.pdf'), join(docs, 'locked.pdf'));

const pipelineFile = join(root, 'small.yaml');
await writeFile(pipelineFile, 'name: small\nstages:\n  chunk: {size: 48, overlap: 8}\n');

function ingest(index: string, extra: readonly string[] = [], stdin?: string): ReturnType<typeof runShoal> {
  return runShoal(['ingest', '--no-progress', '--model', MODEL, '--pipeline', pipelineFile, '--index', index, '--json', ...extra], stdin === undefined ? {} : { stdin });
}

const withoutTime = (rows: readonly Row[]): Omit<Row, 'ingested_at' | 'vector'>[] => rows.map(({ ingested_at: _t, vector: _v, ...rest }) => rest);

describe('shoal ingest', () => {
  const index = join(root, 'index');

  it('indexes a folder, fails the encrypted PDF alone (exit 3), then re-runs writing nothing', async () => {
    const first = await ingest(index, [docs]);
    expect(first.stderr).toContain('[PARTIAL_FAILURE]');
    expect(first.code).toBe(3);
    const summary = summaryOf(first.stdout);
    expect(summary.documents).toEqual({ total: 6, ok: 5, failed: 1, unchanged: 0 });
    expect(summary.failed).toEqual([{ source: join(docs, 'locked.pdf'), code: 'DOCUMENT_ENCRYPTED', reason: expect.any(String) }]);
    expect(summary.pages).toBe(4 + 1 + 3);

    const rows = await readRows(index);
    expect(rows.length).toBe(summary.chunks);
    const bySource = groupBySource(rows);
    expect([...bySource.keys()].sort()).toEqual(['alpha.txt', 'beta.md', 'crazyones.pdf', 'four-pages.pdf', 'gamma.txt'].map((f) => join(docs, f)));
    for (const [source, sourceRows] of bySource) {
      const bytes = await readFile(source);
      // document_id is the content hash; chunk indexes run 0..n-1 without gaps.
      expect(new Set(sourceRows.map((row) => row.document_id))).toEqual(new Set([sha256(bytes)]));
      expect(sourceRows.map((row) => row.chunk).sort((a, b) => a - b)).toEqual(sourceRows.map((_, i) => i));
      for (const row of sourceRows) {
        expect(row.end).toBeGreaterThan(row.start);
        expect(row.text.length).toBe(row.end - row.start);
        expect(row.vector).toHaveLength(384);
      }
      if (!source.endsWith('.pdf')) {
        // Text files: the chunk is exactly the file's characters at [start, end).
        const text = bytes.toString('utf8');
        for (const row of sourceRows) expect(text.slice(row.start, row.end)).toBe(row.text);
      }
    }
    expect(new Set(bySource.get(join(docs, 'four-pages.pdf'))?.map((row) => row.page))).toEqual(new Set([1, 2, 3, 4]));
    expect(bySource.get(join(docs, 'gamma.txt'))?.map((row) => row.text)).toEqual(['Gamma is a single short note about lighthouses.']);
    expect(bySource.get(join(docs, 'alpha.txt'))?.length).toBeGreaterThan(3);
    // Markdown headings follow the chunks.
    const beta = bySource.get(join(docs, 'beta.md')) ?? [];
    expect(beta.some((row) => row.heading === 'Install' && row.text.includes('beta report'))).toBe(true);

    const version = await tableVersion(index);
    const again = await ingest(index, [docs]);
    expect(again.code).toBe(3);
    expect(summaryOf(again.stdout)).toMatchObject({ documents: { total: 6, ok: 0, failed: 1, unchanged: 5 }, chunks: 0, pages: 0 });
    expect(await tableVersion(index)).toBe(version);
    expect(await readRows(index)).toEqual(rows);
  });

  it('a changed document replaces exactly its rows; --force rewrites the same ids; excluding the failure exits 0', async () => {
    const before = await readRows(index);
    const alpha = join(docs, 'alpha.txt');
    await writeFile(alpha, paragraphs('alpha', 5));
    const changed = await ingest(index, [docs, '--exclude', 'locked.pdf']);
    expect(changed.code, changed.stderr).toBe(0);
    expect(summaryOf(changed.stdout).documents).toEqual({ total: 5, ok: 1, failed: 0, unchanged: 4 });
    const after = await readRows(index);
    const others = (rows: readonly Row[]): Row[] => rows.filter((row) => row.source !== alpha);
    expect(others(after)).toEqual(others(before));
    const newAlpha = after.filter((row) => row.source === alpha);
    expect(new Set(newAlpha.map((row) => row.document_id))).toEqual(new Set([sha256(await readFile(alpha))]));
    expect(newAlpha.length).toBeLessThan(before.filter((row) => row.source === alpha).length);
    expect(newAlpha.every((row) => !before.some((old) => old.id === row.id))).toBe(true);

    const forced = await ingest(index, [docs, '--exclude', '*.pdf', '--force']);
    expect(forced.code, forced.stderr).toBe(0);
    expect(summaryOf(forced.stdout).documents).toEqual({ total: 3, ok: 3, failed: 0, unchanged: 0 });
    const rewritten = await readRows(index);
    expect(withoutTime(rewritten)).toEqual(withoutTime(after));
    const textRows = rewritten.filter((row) => !row.source.endsWith('.pdf'));
    expect(textRows.every((row) => row.ingested_at > (after.find((old) => old.id === row.id)?.ingested_at ?? ''))).toBe(true);
  });

  it('reads JSON Lines records on stdin, and refuses an index built with another model', async () => {
    const recordsIndex = join(root, 'records');
    const run = await ingest(recordsIndex, ['-'], '{"id":"r1","text":"First record about rivers."}\n{"id":"r2","path":"' + join(docs, 'gamma.txt') + '"}\n');
    expect(run.code, run.stderr).toBe(0);
    expect(summaryOf(run.stdout).documents).toEqual({ total: 2, ok: 2, failed: 0, unchanged: 0 });
    const rows = await readRows(recordsIndex);
    expect(rows.map((row) => [row.source, row.text]).sort()).toEqual([['r1', 'First record about rivers.'], ['r2', 'Gamma is a single short note about lighthouses.']]);

    const otherModel = await runShoal(['ingest', '--no-progress', '--model', join(CONFORMANCE_DIR, 'bert-mean-embed'), '--index', recordsIndex, '-'], { stdin: '{"id":"r3","text":"x"}\n' });
    expect(otherModel.code).toBe(2);
    expect(otherModel.stderr).toContain(`built with model ${MODEL}`);
  });

  it('takes 200,000 records on stdin (their list was once spread into one push call, which overflowed the call stack)', async () => {
    // The index is a file, so the run stops at openIndex, right after the records are collected: exit 2 naming it, not INTERNAL.
    const notAFolder = join(root, 'records-index-file');
    await writeFile(notAFolder, 'x');
    const records = Array.from({ length: 200_000 }, (_, i) => `{"id":"r${i}","text":"record ${i}"}\n`).join('');
    const run = await ingest(notAFolder, ['-'], records);
    expect(run.stderr).not.toContain('Maximum call stack');
    expect(run.code, run.stderr).toBe(2);
    expect(run.stderr).toContain('is a file, not a folder');
  });

  it('a scanned page is OCR\'d and its words are indexed under its own page number', async () => {
    const scanned = 'The harbour pilots of Velmora guide cargo ships through the northern channel every morning.';
    const folder = join(root, 'scans');
    await mkdir(folder);
    await writeFile(join(folder, 'scan.pdf'), writePdf([textPage('Page one keeps a real text layer about the fish market.'), await scannedPage(scanned)]));
    const scanIndex = join(root, 'scan-index');
    const run = await ingest(scanIndex, [folder]);
    expect(run.code, run.stderr).toBe(0);
    expect(summaryOf(run.stdout)).toMatchObject({ documents: { ok: 1 }, pages: 2, ocr_pages: 1 });
    const rows = await readRows(scanIndex);
    expect(rows.find((row) => row.page === 1)?.text).toBe('Page one keeps a real text layer about the fish market.');
    const pageTwo = rows.filter((row) => row.page === 2).map((row) => row.text).join(' ');
    expect(pageTwo).toMatch(/Velmora/);
    expect(pageTwo).toMatch(/harbour pilots/);
  });

  it('shoal pipelines show prints the resolved definition, and refuses a bad file with exit 2', async () => {
    const shown = await runShoal(['pipelines', 'show', pipelineFile]);
    expect(shown.code, shown.stderr).toBe(0);
    const definition: unknown = JSON.parse(shown.stdout);
    expect(definition).toMatchObject({
      name: 'small',
      stages: { chunk: { size: 48, overlap: 8 }, encode: { model: 'sentence-transformers/all-MiniLM-L6-v2', distance: 'cosine' }, write: { index: './shoal-index', table: 'chunks' } },
      settingsHash: expect.stringMatching(/^[0-9a-f]{16}$/),
    });
    const bad = join(root, 'bad.yaml');
    await writeFile(bad, 'name: bad\nstages:\n  chunk: {size: 10, overlap: 2, colour: red}\n');
    const refused = await runShoal(['pipelines', 'show', bad]);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain('stages.chunk');
  });

  it('killed with SIGKILL (or stopped with SIGINT) mid-run and re-run, it ends with exactly the rows of an uninterrupted run', async () => {
    const many = join(root, 'many');
    await mkdir(many);
    for (let i = 0; i < 24; i += 1) await writeFile(join(many, `doc-${String(i).padStart(2, '0')}.txt`), paragraphs(`topic${i}`, 30));
    const committing = join(root, 'commit.yaml');
    // Small waves, a commit after each: the kill lands between commits.
    await writeFile(committing, 'name: small-commits\nstages:\n  chunk: {size: 32, overlap: 0}\n  write: {batchRows: 40}\n');
    const args = (index: string): string[] => ['ingest', '--no-progress', '--model', MODEL, '--pipeline', committing, '--index', index, '--json', many];

    const reference = join(root, 'reference');
    const whole = await runShoal(args(reference));
    expect(whole.code, whole.stderr).toBe(0);

    const interrupted = join(root, 'interrupted');
    const child = spawn(process.execPath, [SHOAL_BIN, ...args(interrupted)], { env: { ...process.env, SHOAL_FROM_SOURCE: CLI_FROM_SOURCE, SHOAL_THREADS: '1' }, stdio: 'ignore' });
    const exited = new Promise<NodeJS.Signals | null>((resolve) => child.on('exit', (_code, signal) => resolve(signal)));
    let committed = 0;
    for (let tries = 0; tries < 600 && committed === 0; tries += 1) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      committed = await committedDocuments(interrupted);
    }
    child.kill('SIGKILL');
    expect(await exited).toBe('SIGKILL');
    const atKill = await committedDocuments(interrupted);
    expect(atKill).toBeGreaterThan(0);
    expect(atKill).toBeLessThan(24);

    const resumed = await runShoal(args(interrupted));
    expect(resumed.code, resumed.stderr).toBe(0);
    const summary = summaryOf(resumed.stdout);
    expect(summary.documents.unchanged).toBeGreaterThanOrEqual(atKill);
    expect(summary.documents.ok + summary.documents.unchanged).toBe(24);
    expect(withoutTime(await readRows(interrupted))).toEqual(withoutTime(await readRows(reference)));

    // Ctrl-C: parsing stops, the wave being encoded is committed, exit 130; the re-run completes it.
    const stopped = join(root, 'stopped');
    const second = spawn(process.execPath, [SHOAL_BIN, ...args(stopped)], { env: { ...process.env, SHOAL_FROM_SOURCE: CLI_FROM_SOURCE, SHOAL_THREADS: '1' }, stdio: 'ignore' });
    const secondExit = new Promise<number | null>((resolve) => second.on('exit', (code) => resolve(code)));
    for (let tries = 0; tries < 600 && (await committedDocuments(stopped)) === 0; tries += 1) await new Promise((resolve) => setTimeout(resolve, 100));
    second.kill('SIGINT');
    expect(await secondExit).toBe(130);
    const atInterrupt = await committedDocuments(stopped);
    expect(atInterrupt).toBeGreaterThan(0);
    expect(atInterrupt).toBeLessThan(24);
    const completed = await runShoal(args(stopped));
    expect(completed.code, completed.stderr).toBe(0);
    expect(summaryOf(completed.stdout).documents.unchanged).toBe(atInterrupt);
    expect(withoutTime(await readRows(stopped))).toEqual(withoutTime(await readRows(reference)));
  }, 300_000);
});

function textPage(text: string): PageSpec {
  return { width: 612, height: 792, lines: wrapText(text, 468, 14).map((line, i) => ({ text: line, x: 72, y: 90 + i * 20, size: 14 })) };
}

/** An image-only page: a text page rendered at 150 dpi and wrapped as a greyscale scan. */
async function scannedPage(text: string): Promise<PageSpec> {
  const doc = await openPdf(writePdf([textPage(text)]));
  try {
    const png = await renderPdfPage(doc, 1, 150);
    const { data, info } = await sharp(png).greyscale().raw().toBuffer({ resolveWithObject: true });
    return { width: 612, height: 792, image: { width: info.width, height: info.height, pixels: new Uint8Array(data) } };
  } finally {
    await doc.destroy();
  }
}

function groupBySource(rows: readonly Row[]): Map<string, Row[]> {
  const out = new Map<string, Row[]>();
  for (const row of rows) out.set(row.source, [...(out.get(row.source) ?? []), row]);
  return out;
}

