import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as lancedb from '@lancedb/lancedb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { IngestJsonSummary } from '../helpers/ingest-summary.js';
import { makeAlternativeEml, makeDocx, makeEml, makeEpub, makePptx, makeXlsx } from '../helpers/document-samples.js';
import { CONFORMANCE_DIR } from '../helpers/shared.js';
import { parseJsonl, runShoal } from '../helpers/shoal-cli.js';

/**
 * `shoal ingest` of a folder holding one document of each new format (DOCX, PPTX, XLSX, EPUB
 * named .bin, two emails) and a truncated DOCX, with the real CLI, the real engine
 * (bench-minilm-l6: real MiniLM tokenizer and geometry, random weights) and a LanceDB index in a
 * temp folder; then `shoal search` over it. With random weights relevance is checked by
 * self-retrieval: the text of the chunk holding a phrase finds that chunk first (cosine ≈ 1).
 */

const MODEL = join(CONFORMANCE_DIR, 'bench-minilm-l6');
const root = await mkdtemp(join(tmpdir(), 'shoal-ingest-formats-'));
const docs = join(root, 'docs');
const index = join(root, 'index');
afterAll(() => rm(root, { recursive: true, force: true }));

/** File name → a phrase it holds and the heading its chunk must carry. */
const EXPECTED: Record<string, { phrase: string; heading: string }> = {
  'handbook.docx': { phrase: 'Double the mooring lines when the glass falls.', heading: 'Mooring in a gale' },
  'review.pptx': { phrase: 'Diaphone replaced by electric horn', heading: 'Fog signals' },
  'stores.xlsx': { phrase: 'Grace Darling\t1834', heading: 'Keepers' },
  'tales.bin': { phrase: 'A rowing boat reached the wreck before noon.', heading: 'The rescue' },
  'meeting.eml': { phrase: 'We meet at the lighthouse by the old quay.', heading: 'Harbour meeting moved' },
  'ferry.eml': { phrase: 'The ferry runs again from Monday.', heading: 'Ferry news' },
};

const Row = z.object({ source: z.string(), page: z.number(), text: z.string(), heading: z.string().nullable() });
const Hit = z.object({ rank: z.number(), score: z.number(), source: z.string(), page: z.number(), text: z.string() });

let summary: IngestJsonSummary;
let exitCode: number | null;
let rows: z.infer<typeof Row>[];

beforeAll(async () => {
  await mkdir(docs);
  const docx = await makeDocx({ heading: 'Tides of the harbour', subheading: 'Mooring in a gale', paragraphs: ['The harbour floods at noon on spring tides.', 'Double the mooring lines when the glass falls.'] });
  await writeFile(join(docs, 'handbook.docx'), docx);
  await writeFile(join(docs, 'broken.docx'), docx.subarray(0, Math.floor(docx.length / 2)));
  await writeFile(join(docs, 'review.pptx'), await makePptx([{ title: 'Quarterly review', body: ['Lamp hours rose'] }, { title: 'Fog signals', body: ['Diaphone replaced by electric horn'] }]));
  await writeFile(join(docs, 'stores.xlsx'), await makeXlsx([{ name: 'Stores', rows: [['Lamp oil', 42]] }, { name: 'Keepers', rows: [['Name', 'Since'], ['Grace Darling', 1834]] }]));
  // An EPUB under a name that says nothing: told by its content.
  await writeFile(join(docs, 'tales.bin'), await makeEpub({ title: 'Tales', chapters: [{ file: 'one.xhtml', title: 'The first storm', paragraphs: ['Waves broke over the seawall.'] }, { file: 'two.xhtml', title: 'The rescue', paragraphs: ['A rowing boat reached the wreck before noon.'] }] }));
  await writeFile(join(docs, 'meeting.eml'), makeEml({ subject: 'Harbour meeting moved', from: 'Ada <ada@example.org>', to: 'Bob <bob@example.org>', date: 'Tue, 03 Mar 2026 09:30:00 +0000', body: 'We meet at the lighthouse by the old quay.' }));
  await writeFile(join(docs, 'ferry.eml'), makeAlternativeEml({ subject: 'Ferry news', text: 'The ferry runs again from Monday.', html: '<p>The ferry runs again from Monday.</p>', attachmentText: 'not indexed' }));
  // Small chunks, so the DOCX's second section is a chunk of its own under its own heading.
  const run = await runShoal(['ingest', '--no-progress', '--json', '--model', MODEL, '--chunk-size', '24', '--chunk-overlap', '0', '--index', index, docs]);
  exitCode = run.code;
  summary = IngestJsonSummary.parse(JSON.parse(run.stdout.trim().split('\n').at(-1) ?? '{}'));
  const db = await lancedb.connect(index);
  const table = await db.openTable('chunks');
  rows = (await table.query().toArray()).map((row: unknown) => Row.parse(row));
  table.close();
  db.close();
}, 240_000);

describe('shoal ingest of DOCX, PPTX, XLSX, EPUB and EML', () => {
  it('indexes every document; the truncated DOCX fails alone with DOCUMENT_CORRUPT (exit 3)', () => {
    expect(exitCode).toBe(3);
    expect(summary.documents).toEqual({ total: 7, ok: 6, failed: 1, unchanged: 0 });
    expect(summary.failed).toHaveLength(1);
    expect(summary.failed[0]).toMatchObject({ source: join(docs, 'broken.docx'), code: 'DOCUMENT_CORRUPT' });
    expect(summary.failed[0]?.reason).toMatch(/DOCX document is damaged/);
    // One page per slide (2), sheet (2) and spine item (2), one for the DOCX and each email.
    expect(summary.pages).toBe(2 + 2 + 2 + 1 + 1 + 1);
    expect(new Set(rows.map((row) => row.source))).toEqual(new Set(Object.keys(EXPECTED).map((name) => join(docs, name))));
  });

  it('keeps each format\'s heading on the chunk that holds the phrase', () => {
    for (const [name, { phrase, heading }] of Object.entries(EXPECTED)) {
      const row = rows.find((candidate) => candidate.source === join(docs, name) && candidate.text.includes(phrase));
      expect(row, name).toBeDefined();
      expect(row?.heading, name).toBe(heading);
    }
  });

  it('shoal search finds the chunk holding each phrase first', async () => {
    for (const [name, { phrase }] of Object.entries(EXPECTED)) {
      const row = rows.find((candidate) => candidate.source === join(docs, name) && candidate.text.includes(phrase));
      const run = await runShoal(['search', row?.text ?? phrase, '--index', index, '--k', '3']);
      expect(run.code, run.stderr).toBe(0);
      const hits = parseJsonl(run.stdout, Hit);
      expect(hits[0]?.source, name).toBe(join(docs, name));
      expect(hits[0]?.text, name).toContain(phrase);
      expect(hits[0]?.score, name).toBeCloseTo(1, 3);
    }
  }, 120_000);
});
