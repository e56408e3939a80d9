import { z } from 'zod';
import { JobId, WIRE_VERSION } from './jobs.js';
import { modelToken, type NatsNames } from './subjects.js';

/**
 * The public wire contract of document jobs (docs/nats.md, "Document jobs"): any service, in any
 * language, starts an ingest by publishing one JSON message per document; `shoal worker
 * --documents` carries each from its source to the index and ends it with exactly one terminal
 * event. Pipelines and indexes are **names** the workers resolve (built-in pipelines or the
 * SHOAL_PIPELINES folder; SHOAL_INDEXES), never paths or URIs taken from a message. Every field is
 * bounded; every object is strict, so a misspelt field is refused, not ignored.
 */

/** Pipeline and index names: what a worker may look up, nothing that walks a file system. */
export const RESOURCE_NAME = /^[A-Za-z0-9_-]{1,64}$/;
const ResourceName = z.string().regex(RESOURCE_NAME, 'names are 1-64 characters of A-Z a-z 0-9 _ -');
/**
 * A document's key within its run: printable (it travels in the Nats-Msg-Id header, where a line
 * break would end the header), at most 512 characters.
 */
const DocKey = z.string().min(1).max(512).regex(/^[^\u0000-\u001f\u007f]+$/, 'doc keys are printable: no control characters');
const Timestamp = z.string().min(1).max(64);
const Count = z.number().int().nonnegative().max(1_000_000_000);
const Hex64 = z.string().regex(/^[0-9a-f]{64}$/);

/** Inline text of one document at most (a NATS message holds 1 MiB by default; larger documents go by reference). */
export const MAX_INLINE_TEXT_CHARS = 8 * 1024 * 1024;

export const DocumentJobSource = z.union([
  /**
   * `s3://bucket/key`, `obj://bucket/name` (this deployment's object store) or `file:///abs/path`
   * inside the worker's file roots. `id`, when given, is the document's `source` in the index
   * instead of the URI (a producer that uploaded a local file keeps its path as the source).
   */
  z.strictObject({ uri: z.string().min(1).max(4096).regex(/^(s3|obj|file):\/\//, 'source.uri is s3://, obj:// or file:///'), id: z.string().min(1).max(4096).optional() }),
  /** Inline text: its `id` is the document's `source` in the index. */
  z.strictObject({ id: z.string().min(1).max(512), text: z.string().max(MAX_INLINE_TEXT_CHARS) }),
]);
export type DocumentJobSource = z.infer<typeof DocumentJobSource>;

/**
 * Metadata a producer attaches to a document: echoed in its terminal event, flat and bounded, and
 * stored with the document's chunks (filterable as `metadata.<field>`), where its keys must be
 * identifiers and its size within adapters/protocol/metadata.ts's bounds (a document whose
 * metadata is not fails with INVALID_INPUT).
 */
const Metadata = z
  .record(z.string().min(1).max(64), z.union([z.string().max(1024), z.number(), z.boolean(), z.null(), z.array(z.string().max(1024)).max(256)]))
  .refine((value) => Object.keys(value).length <= 64, 'metadata has at most 64 keys');

/** One document to ingest, on `<prefix>.documents.<pipeline-token>` with `Nats-Msg-Id: <run_id>.<doc>`. */
export const DocumentJob = z.strictObject({
  v: z.literal(WIRE_VERSION),
  run_id: JobId,
  doc: DocKey,
  source: DocumentJobSource,
  pipeline: ResourceName,
  index: ResourceName,
  metadata: Metadata.optional(),
  submitted_at: Timestamp,
});
export type DocumentJob = z.infer<typeof DocumentJob>;

export const TerminalState = z.enum(['committed', 'unchanged', 'failed']);
export type TerminalState = z.infer<typeof TerminalState>;

/** How a document ended, on `<prefix>.events.documents.<run_id>` (one distinct event per document). */
export const DocumentEvent = z.strictObject({
  v: z.literal(WIRE_VERSION),
  run_id: JobId,
  doc: DocKey,
  /** The document's `source` in the index (a file's absolute path, an s3:// or obj:// URI, an inline id). */
  source: z.string().min(1).max(4096),
  /** sha256 of its bytes; null when they could not be read. */
  document_id: Hex64.nullable(),
  state: TerminalState,
  code: z.string().min(1).max(64).optional(),
  reason: z.string().max(2048).optional(),
  chunks: Count,
  pages: Count,
  /** Pages read by OCR (scanned pages, images). */
  ocr_pages: Count.optional(),
  metadata: Metadata.optional(),
  worker: z.string().max(512),
  finished_at: Timestamp,
});
export type DocumentEvent = z.infer<typeof DocumentEvent>;

/** A producer announcing its run's size on `<prefix>.runs.open`: the run completes once that many documents ended. */
export const RunOpen = z.strictObject({
  v: z.literal(WIRE_VERSION),
  run_id: JobId,
  expected: z.number().int().nonnegative().max(10_000_000),
  /** Shown in the run's status; the pipeline and index of its first document otherwise. */
  pipeline: ResourceName.optional(),
  index: ResourceName.optional(),
});
export type RunOpen = z.infer<typeof RunOpen>;

/** A run's end, on `<prefix>.events.runs.<run_id>`, once every document it announced has ended. */
export const RunEvent = z.strictObject({
  v: z.literal(WIRE_VERSION),
  run_id: JobId,
  state: z.enum(['completed', 'partial', 'failed']),
  documents: z.strictObject({ total: Count, ok: Count, failed: Count, unchanged: Count }),
  pages: Count,
  chunks: Count,
  finished_at: Timestamp,
});
export type RunEvent = z.infer<typeof RunEvent>;

/** The names of the document-job topology (docs/nats.md). */
export interface DocumentNames {
  /** Work-queue stream of document jobs: `<prefix>.documents.>`. */
  stream: string;
  subject(pipeline: string): string;
  allSubjects(): string;
  /** Durable pull consumer of one pipeline, shared by every document worker that serves it. */
  consumer(pipeline: string): string;
  /** Limits stream of events (7 days): `<prefix>.events.>`. */
  eventsStream: string;
  documentEvents(runId: string): string;
  runEvents(runId: string): string;
  allEvents(): string;
  /** Work-queue stream of run announcements: `<prefix>.runs.>`, consumer `<p>_runs`. */
  runsStream: string;
  runsOpen: string;
  runsConsumer: string;
  deadLetter(pipeline: string): string;
}

export function documentNames(names: NatsNames): DocumentNames {
  const p = names.prefix;
  const upper = names.jobsStream.replace(/_JOBS$/, '');
  const lower = names.statusBucket.replace(/_jobs$/, '');
  const token = (pipeline: string): string => modelToken(pipeline);
  return Object.freeze({
    stream: `${upper}_DOCUMENTS`,
    subject: (pipeline: string) => `${p}.documents.${token(pipeline)}`,
    allSubjects: () => `${p}.documents.>`,
    consumer: (pipeline: string) => `${lower}_documents_${token(pipeline)}`,
    eventsStream: `${upper}_EVENTS`,
    documentEvents: (runId: string) => `${p}.events.documents.${runId}`,
    runEvents: (runId: string) => `${p}.events.runs.${runId}`,
    allEvents: () => `${p}.events.>`,
    runsStream: `${upper}_RUNS`,
    runsOpen: `${p}.runs.open`,
    runsConsumer: `${lower}_runs`,
    deadLetter: (pipeline: string) => `${p}.dlq.documents.${token(pipeline)}`,
  });
}

/** The message id of a document job and of its terminal event: repeats within the window are stored once. */
export function documentMessageId(runId: string, doc: string): string {
  return `${runId}.${doc}`;
}
