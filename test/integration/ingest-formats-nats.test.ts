import type { ChildProcess } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeAlternativeEml, makeDocx, makeEml, makeEpub, makePptx, makeXlsx } from '../helpers/document-samples.js';
import { summaryOf } from '../helpers/ingest-summary.js';
import { expectSameRows, INGEST_ENV as ENV, readRows, startWorkerProcess, stopWorkerProcess } from '../helpers/ingest-nats.js';
import { natsServerAvailable, NATS_SERVER_MISSING, startNatsServer, type NatsServerHandle } from '../helpers/nats-server.js';
import { TINY_MEAN, uniquePrefix } from '../helpers/nats-worker.js';
import { runShoal } from '../helpers/shoal-cli.js';

/**
 * The new formats over NATS: a real `shoal worker --parse` reads a DOCX, PPTX, XLSX, EPUB and two
 * emails and stores their pages (their type on the wire, StoredPages.type); the CLI coordinates.
 * The rows must be those of an in-process run, and a truncated DOCX must fail alike.
 */

describe.skipIf(!natsServerAvailable())('shoal ingest --nats of DOCX, PPTX, XLSX, EPUB and EML', () => {
  let server: NatsServerHandle;
  let worker: ChildProcess;
  let root: string;
  let docs: string;
  const prefix = uniquePrefix('formatsnats');

  beforeAll(async () => {
    server = await startNatsServer();
    root = await mkdtemp(join(tmpdir(), 'shoal-formats-nats-'));
    docs = join(root, 'docs');
    await mkdir(docs);
    const docx = await makeDocx({ heading: 'Tides', subheading: 'Neaps', paragraphs: ['Low water at six.', 'High water at noon.'] });
    await writeFile(join(docs, 'tides.docx'), docx);
    await writeFile(join(docs, 'cut.docx'), docx.subarray(0, Math.floor(docx.length / 2)));
    await writeFile(join(docs, 'deck.pptx'), await makePptx([{ title: 'One', body: ['first slide words'], notes: 'note words' }, { title: 'Two', body: ['second slide words'] }]));
    await writeFile(join(docs, 'sheet.xlsx'), await makeXlsx([{ name: 'Stores', rows: [['Lamp oil', 42]] }, { name: 'Keepers', rows: [['Grace Darling', 1834]] }]));
    await writeFile(join(docs, 'book.epub'), await makeEpub({ title: 'Book', chapters: [{ file: 'a.xhtml', title: 'Opening', paragraphs: ['Chapter words.'] }, { file: 'b.xhtml', title: 'Ending', paragraphs: ['Last words.'] }] }));
    await writeFile(join(docs, 'note.eml'), makeEml({ subject: 'Hello', from: 'a@example.org', to: 'b@example.org', date: 'Tue, 03 Mar 2026 09:30:00 +0000', body: 'Body words.' }));
    await writeFile(join(docs, 'alt.eml'), makeAlternativeEml({ subject: 'Alt', text: 'Plain words.', html: '<h1>HTML</h1>', attachmentText: 'no' }));
    worker = startWorkerProcess(server.url, prefix);
  }, 60_000);

  afterAll(async () => {
    await stopWorkerProcess(worker);
    await server?.stop();
    await rm(root, { recursive: true, force: true });
  }, 30_000);

  it(natsServerAvailable() ? 'a parse worker reads every format: the same rows and the same failure as in process' : NATS_SERVER_MISSING, async () => {
    const args = (index: string): string[] => ['ingest', docs, '--no-progress', '--model', TINY_MEAN, '--index', index, '--json'];
    const [local, remote] = await Promise.all([
      runShoal(args(join(root, 'local')), { env: ENV }),
      runShoal([...args(join(root, 'nats')), '--nats', server.url], { env: { ...ENV, SHOAL_SUBJECT_PREFIX: prefix } }),
    ]);
    expect(local.code, local.stderr).toBe(3);
    expect(remote.code, remote.stderr).toBe(3);
    const localSummary = summaryOf(local.stdout);
    const remoteSummary = summaryOf(remote.stdout);
    expect(remoteSummary.documents).toEqual({ total: 7, ok: 6, failed: 1, unchanged: 0 });
    expect(remoteSummary).toMatchObject({ documents: localSummary.documents, pages: localSummary.pages, chunks: localSummary.chunks });
    // Slides 2, sheets 2, spine items 2, and one page for the DOCX and each email.
    expect(remoteSummary.pages).toBe(9);
    expect(remoteSummary.failed.map(({ source, code }) => ({ source, code }))).toEqual([{ source: join(docs, 'cut.docx'), code: 'DOCUMENT_CORRUPT' }]);
    const localRows = await readRows(join(root, 'local'));
    expect(new Set(localRows.map((row) => row.source.split('/').at(-1)))).toEqual(new Set(['tides.docx', 'deck.pptx', 'sheet.xlsx', 'book.epub', 'note.eml', 'alt.eml']));
    expectSameRows(localRows, await readRows(join(root, 'nats')));
  }, 180_000);
});
