import { z } from 'zod';
import { MAX_METADATA_KEYS, METADATA_KEY } from '../../../adapters/protocol/metadata.js';
import { TableName } from '../../../pipelines/documents/definition.js';
import { NatsUrlsText, WholeNumberFlag } from '../../settings/flag-values.js';

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
  nats: NatsUrlsText.optional(),
  json: z.boolean().optional(),
  chunkSize: WholeNumberFlag(8, 8192).optional(),
  chunkOverlap: WholeNumberFlag(0, 4096).optional(),
  onError: z.enum(['skip', 'fail']).optional(),
  rejects: z.string().min(1).optional(),
  detach: z.boolean().optional(),
  /** `--metadata-fields title,year`: record fields lifted into the record's metadata (sources.ts liftMetadataFields). */
  metadataFields: z
    .string()
    .transform((value) => value.split(',').map((field) => field.trim()).filter((field) => field !== ''))
    .pipe(z.array(z.string().regex(METADATA_KEY, 'metadata fields are names of 1-64 letters, digits and _ (not starting with a digit)').refine((field) => !['id', 'text', 'path', 'metadata'].includes(field), 'id, text, path and metadata are the record itself, not metadata')).min(1).max(MAX_METADATA_KEYS))
    .optional(),
});

export type IngestFlagValues = z.output<typeof IngestFlags>;

/** Stdin lines left out by --on-error skip, and where they are. */
export interface Rejected {
  count: number;
  file: string | null;
}
