import { z } from 'zod';
import { TableName } from '../../../pipelines/documents/definition.js';
import { WholeNumberFlag } from '../../settings/flag-values.js';

/** The flags of `shoal ingest` (commands/ingest.ts), shared with its document-job path (ingest-produce.ts). */

export const IngestFlags = z.strictObject({
  pipeline: z.string().min(1).optional(),
  model: z.string().min(1).optional(),
  index: z.string().min(1).optional(),
  table: TableName.optional(),
  include: z.array(z.string().min(1)).optional(),
  exclude: z.array(z.string().min(1)).optional(),
  hidden: z.boolean().optional(),
  ocr: z.enum(['auto', 'always', 'never']).optional(),
  force: z.boolean().optional(),
  prune: z.boolean().optional(),
  nats: z.string().min(1).optional(),
  json: z.boolean().optional(),
  chunkSize: WholeNumberFlag(8, 8192).optional(),
  chunkOverlap: WholeNumberFlag(0, 4096).optional(),
  onError: z.enum(['skip', 'fail']).optional(),
  rejects: z.string().min(1).optional(),
  detach: z.boolean().optional(),
});

export type IngestFlagValues = z.output<typeof IngestFlags>;

/** Stdin lines left out by --on-error skip, and where they are. */
export interface Rejected {
  count: number;
  file: string | null;
}
