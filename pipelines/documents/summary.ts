import { z } from 'zod';

/**
 * What an ingest run reports: counts per outcome, each failed document with its code and reason,
 * pages, chunks and seconds. One schema, because the summary also travels as data: an
 * interrupted run's CANCELLED error carries it in its details (interrupted.ts), read back here.
 */

export const FailedDocument = z.object({ source: z.string(), code: z.string(), reason: z.string() });
export type FailedDocument = z.output<typeof FailedDocument>;

export const IngestSummary = z.object({
  documents: z.object({ total: z.number(), ok: z.number(), failed: z.number(), unchanged: z.number() }),
  failed: z.array(FailedDocument),
  pages: z.number(),
  ocrPages: z.number(),
  chunks: z.number(),
  seconds: z.number(),
  /** Documents deleted from the index because they left their folder (`shoal ingest --prune`, set by the caller that prunes). */
  removed: z.number().optional(),
});
export type IngestSummary = z.output<typeof IngestSummary>;
