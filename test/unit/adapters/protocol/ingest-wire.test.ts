import { describe, expect, it } from 'vitest';
import { DocumentStatus, ParseTask, StoredPages } from '../../../../adapters/protocol/ingest.js';

const HASH = 'a'.repeat(64);
const task = {
  v: 1,
  run_id: 'run-1',
  doc: 0,
  source: '/docs/a.pdf',
  document_id: HASH,
  ref: 'obj://shoal_payloads/ingest/run-1/0.bin',
  parse: { ocr: 'auto', ocrModel: 'paddleocr/pp-ocrv4', ocrDpi: 150, maxBytes: 1024, maxPages: 10 },
};

describe('ingest wire schemas', () => {
  it('accepts a parse task as the coordinator writes it, and refuses anything unbounded or foreign', () => {
    expect(ParseTask.parse(task)).toEqual(task);
    // `furniture` is optional: a coordinator older than the option sends none (the worker then keeps every line).
    const dropping = { ...task, parse: { ...task.parse, furniture: 'drop' } };
    expect(ParseTask.parse(dropping)).toEqual(dropping);
    for (const bad of [
      { ...task, parse: { ...task.parse, furniture: 'strip' } },
      { ...task, run_id: 'run.1' },
      { ...task, doc: -1 },
      { ...task, doc: 1e12 },
      { ...task, document_id: 'xyz' },
      { ...task, ref: '/etc/passwd' },
      { ...task, ref: 'http://example.com/a' },
      { ...task, source: 'x'.repeat(5000) },
      { ...task, parse: { ...task.parse, ocrDpi: 5000 } },
      { ...task, extra: 1 },
    ]) {
      expect(ParseTask.safeParse(bad).success, JSON.stringify(bad).slice(0, 80)).toBe(false);
    }
  });

  it('bounds document statuses and stored pages', () => {
    const status = { v: 1, run_id: 'run-1', doc: 3, source: 'r1', document_id: HASH, state: 'failed', code: 'DOCUMENT_ENCRYPTED', reason: 'password', updated_at: new Date(0).toISOString() };
    expect(DocumentStatus.parse(status)).toEqual(status);
    expect(DocumentStatus.safeParse({ ...status, state: 'done' }).success).toBe(false);
    expect(DocumentStatus.safeParse({ ...status, reason: 'x'.repeat(3000) }).success).toBe(false);
    const pages = { v: 1, document_id: HASH, type: 'pdf', pages: [{ page: 1, text: 'hello', ocr: false, headings: [{ offset: 0, text: 'Intro' }] }] };
    expect(StoredPages.parse(pages)).toEqual(pages);
    expect(StoredPages.safeParse({ ...pages, pages: [{ page: 0, text: '', ocr: false }] }).success).toBe(false);
  });
});
