import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ParseOutcome } from '../../pipelines/documents/document.js';
import { DocumentParser } from '../../pipelines/documents/parse.js';
import { InferenceEngine } from '../../pipelines/inference/engine.js';
import { makeAlternativeEml, makeDocx, makeEml, makeEpub, makePptx, makeXlsx } from '../helpers/document-samples.js';

/**
 * The parse stage (its parse threads) on DOCX, PPTX, XLSX, EPUB and EML made here, each under a
 * name that says nothing, good and damaged ones mixed in one run: every good document comes back
 * with its type and pages, every damaged one fails alone with its own code, and the parser goes on.
 */

let engine: InferenceEngine;
let parser: DocumentParser;

beforeAll(() => {
  engine = new InferenceEngine();
  parser = new DocumentParser(engine, { threads: 1, ocr: 'never' });
});
afterAll(async () => {
  await parser.close();
  await engine.close();
});

const half = (bytes: Uint8Array): Uint8Array => bytes.subarray(0, Math.floor(bytes.length / 2));

describe('parse threads read the new formats', () => {
  it('good and damaged documents of each kind in one run: types, pages, one failure each', async () => {
    const docx = await makeDocx({ heading: 'Tide tables', subheading: 'Neap tides', paragraphs: ['Low water at six.', 'High water at noon.'] });
    const pptx = await makePptx([{ title: 'One', body: ['first slide words'] }, { title: 'Two', body: ['second slide words'] }]);
    const xlsx = await makeXlsx([{ name: 'Only', rows: [['cell words', 7]] }]);
    const epub = await makeEpub({ title: 'Book', chapters: [{ file: 'a.xhtml', title: 'Opening', paragraphs: ['Chapter words.'] }] });
    const eml = makeEml({ subject: 'Hello', from: 'a@example.org', to: 'b@example.org', date: 'Tue, 03 Mar 2026 09:30:00 +0000', body: 'Body words.' });
    const alternative = makeAlternativeEml({ subject: 'Alt', text: 'Plain words.', html: '<p>HTML words.</p>', attachmentText: 'no' });
    const inputs: { uri: string; bytes: Uint8Array }[] = [
      { uri: 'good-docx', bytes: docx },
      { uri: 'cut-docx', bytes: half(docx) },
      { uri: 'good-pptx', bytes: pptx },
      { uri: 'cut-pptx', bytes: half(pptx) },
      { uri: 'good-xlsx', bytes: xlsx },
      { uri: 'cut-xlsx', bytes: half(xlsx) },
      { uri: 'good-epub', bytes: epub },
      { uri: 'cut-epub', bytes: half(epub) },
      { uri: 'good-eml', bytes: eml },
      { uri: 'alt-eml', bytes: alternative },
      { uri: 'headers-only-eml', bytes: new TextEncoder().encode('From: a@example.org\r\nTo: b@example.org\r\n\r\n') },
    ];
    const outcomes: ParseOutcome[] = [];
    for (const input of inputs) outcomes.push(await parser.parse(input));
    const summary = outcomes.map((outcome) => (outcome.ok ? { source: outcome.document.source, type: outcome.document.type, pages: outcome.document.pages.length } : { source: outcome.source, code: outcome.code }));
    expect(summary).toEqual([
      { source: 'good-docx', type: 'docx', pages: 1 },
      { source: 'cut-docx', code: 'DOCUMENT_CORRUPT' },
      { source: 'good-pptx', type: 'pptx', pages: 2 },
      { source: 'cut-pptx', code: 'DOCUMENT_CORRUPT' },
      { source: 'good-xlsx', type: 'xlsx', pages: 1 },
      { source: 'cut-xlsx', code: 'DOCUMENT_CORRUPT' },
      { source: 'good-epub', type: 'epub', pages: 1 },
      { source: 'cut-epub', code: 'DOCUMENT_CORRUPT' },
      { source: 'good-eml', type: 'eml', pages: 1 },
      { source: 'alt-eml', type: 'eml', pages: 1 },
      { source: 'headers-only-eml', code: 'DOCUMENT_EMPTY' },
    ]);
    const good = outcomes.flatMap((outcome) => (outcome.ok ? [outcome.document] : []));
    expect(good.find((document) => document.type === 'docx')?.pages[0]?.headings?.map((heading) => heading.text)).toEqual(['Tide tables', 'Neap tides']);
    expect(good.find((document) => document.type === 'pptx')?.pages.map((page) => page.text)).toEqual(['One\n\nfirst slide words', 'Two\n\nsecond slide words']);
    expect(good.find((document) => document.type === 'epub')?.title).toBe('Book');
    const reasons = outcomes.flatMap((outcome) => (outcome.ok ? [] : [outcome.reason]));
    expect(reasons.slice(0, 4)).toEqual([
      'the DOCX document is damaged: its ZIP directory cannot be found (a truncated file?)',
      'the PPTX presentation is damaged: its ZIP directory cannot be found (a truncated file?)',
      'the XLSX workbook is damaged: its ZIP directory cannot be found (a truncated file?)',
      'the EPUB book is damaged: its ZIP directory cannot be found (a truncated file?)',
    ]);
  }, 60_000);
});
