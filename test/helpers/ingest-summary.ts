import * as lancedb from '@lancedb/lancedb';
import { z } from 'zod';

/** `shoal ingest --json`'s summary object, every field (docs/ingest.md lists them). */
export const IngestJsonSummary = z.strictObject({
  documents: z.strictObject({ total: z.number(), ok: z.number(), failed: z.number(), unchanged: z.number() }),
  failed: z.array(z.object({ source: z.string(), code: z.string(), reason: z.string() })),
  pages: z.number(),
  ocr_pages: z.number(),
  chunks: z.number(),
  seconds: z.number(),
  index: z.string(),
  table: z.string(),
  pipeline: z.string(),
  removed: z.number(),
  outages: z.array(z.unknown()),
  interrupted: z.boolean(),
  rejected: z.number(),
  rejects_file: z.string().nullable(),
  chunk: z.strictObject({ size: z.number(), overlap: z.number() }),
});
export type IngestJsonSummary = z.output<typeof IngestJsonSummary>;

/** The summary `shoal ingest --json` prints as its last stdout line. */
export function summaryOf(stdout: string): IngestJsonSummary {
  return IngestJsonSummary.parse(JSON.parse(stdout.trim().split('\n').at(-1) ?? '{}'));
}

/** Documents committed so far to a LanceDB index's default table (its state rows; 0 before the table exists). */
export async function committedDocuments(index: string): Promise<number> {
  try {
    const db = await lancedb.connect(index);
    if (!(await db.tableNames()).includes('chunks__documents')) return 0;
    const table = await db.openTable('chunks__documents');
    const n = await table.countRows();
    table.close();
    db.close();
    return n;
  } catch {
    return 0;
  }
}
