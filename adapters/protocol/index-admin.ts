import { z } from 'zod';

/**
 * What `shoal index stats|documents|delete|tables --json` prints and the gateway's /v1/indexes
 * routes answer: one shape for both (pipelines/documents/index-admin.ts builds them). Field names
 * are snake_case, as the rows' own (`document_id`, `ingested_at`).
 */

/** Documents one page may list (`--limit`, `?limit=`). */
export const MAX_DOCUMENTS_PAGE = 1_000;
/** Documents a page lists when no limit is given. */
export const DEFAULT_DOCUMENTS_PAGE = 100;
/** The longest source (a URI or a path) a request may name or filter by: quoted, it stays within a filter's 4,096 characters. */
export const MAX_SOURCE_CHARS = 2_000;
/** The largest `offset` accepted: far beyond any index, small enough to stay an exact integer. */
export const MAX_DOCUMENTS_OFFSET = 1_000_000_000;

export const INDEX_BACKENDS = ['lancedb', 'pgvector', 'chroma', 'qdrant', 'file', 's3'] as const;
const Backend = z.enum(INDEX_BACKENDS);

/** A document as the index keeps its state (adapters/stores/store.ts DocumentState). */
export const IndexDocument = z.strictObject({
  source: z.string(),
  document_id: z.string(),
  chunks: z.number().int().nonnegative(),
  pages: z.number().int().nonnegative(),
  /** Hash of the settings the document was indexed with: another value re-indexes it. */
  settings: z.string(),
  ingested_at: z.string(),
});
export type IndexDocument = z.infer<typeof IndexDocument>;

export const IndexStats = z.strictObject({
  /** The index as given, without credentials (a configured name on the gateway). */
  index: z.string(),
  backend: Backend,
  table: z.string(),
  /** Chunk rows. */
  rows: z.number().int().nonnegative(),
  /** Documents with a committed state. */
  documents: z.number().int().nonnegative(),
  /** Values per stored vector (packed bytes for the binary types). */
  dimension: z.number().int().positive(),
  distance: z.enum(['cosine', 'l2', 'dot']),
  vector_type: z.string(),
  optional_columns: z.array(z.string()),
  /** The encode model the index was built with (metadata.model), null when not recorded. */
  model: z.string().nullable(),
  /** Every fact ingest stored with the table (model, pipeline, ...). */
  metadata: z.record(z.string(), z.string()),
  /** Bytes the table takes where the store tells (LanceDB and file:// folders, PostgreSQL, S3); null elsewhere. */
  size_bytes: z.number().int().nonnegative().nullable(),
  /** The latest `ingested_at` of its documents; null when it has none. */
  last_ingested_at: z.string().nullable(),
});
export type IndexStats = z.infer<typeof IndexStats>;

export const IndexDocumentsPage = z.strictObject({
  index: z.string(),
  table: z.string(),
  /** Documents matching the prefix, all pages together. */
  total: z.number().int().nonnegative(),
  offset: z.number().int().nonnegative(),
  limit: z.number().int().positive(),
  source_prefix: z.string().nullable(),
  /** Ordered by source. */
  documents: z.array(IndexDocument),
  /** The offset of the next page; null on the last. */
  next_offset: z.number().int().nonnegative().nullable(),
});
export type IndexDocumentsPage = z.infer<typeof IndexDocumentsPage>;

export const IndexDeleted = z.strictObject({
  index: z.string(),
  table: z.string(),
  source: z.string(),
  /** Whether the source had a committed state (1) or only rows left by an interrupted run (0). */
  documents: z.number().int().min(0).max(1),
  /** Chunk rows removed. */
  chunks: z.number().int().nonnegative(),
});
export type IndexDeleted = z.infer<typeof IndexDeleted>;

export const IndexTables = z.strictObject({
  index: z.string(),
  backend: Backend,
  tables: z.array(z.strictObject({ name: z.string(), rows: z.number().int().nonnegative() })),
});
export type IndexTables = z.infer<typeof IndexTables>;

/** GET /v1/indexes: the names a request may use (SHOAL_INDEXES), never their paths or URIs. */
export const IndexList = z.strictObject({
  indexes: z.array(z.strictObject({ name: z.string(), backend: Backend, table: z.string() })),
});
export type IndexList = z.infer<typeof IndexList>;

const Whole = (max: number): z.ZodType<number, string> =>
  z.string().regex(/^\d{1,10}$/, 'must be a whole number').transform(Number).pipe(z.number().int().min(0).max(max));

/** `?limit=&offset=&source_prefix=` of GET /v1/indexes/:name/documents. */
export const DocumentsQuery = z.strictObject({
  limit: Whole(MAX_DOCUMENTS_PAGE).refine((value) => value >= 1, `must be from 1 to ${MAX_DOCUMENTS_PAGE}`).optional(),
  offset: Whole(MAX_DOCUMENTS_OFFSET).optional(),
  source_prefix: z.string().min(1).max(MAX_SOURCE_CHARS).optional(),
});

/** `?source=` of DELETE /v1/indexes/:name/documents (the source %-encoded, as any query value). */
export const DeleteDocumentQuery = z.strictObject({
  source: z.string().min(1).max(MAX_SOURCE_CHARS),
});
