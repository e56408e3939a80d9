import { z } from 'zod';
import { DOCUMENT_TYPES } from './document-types.js';
import { DataRef, Degraded, JobId, WIRE_VERSION } from './jobs.js';

/**
 * Wire schemas of document ingest over NATS (docs/ingest.md, "Over NATS"): the parse task a
 * coordinator publishes for one document stored by reference, the pages a parse worker stores
 * back, the per-document status in the ingest KV bucket, and the status of a whole ingest run
 * (what `GET /v1/jobs/:id` answers for an ingest job). Every field is bounded.
 */

/** Documents in one run at most (a document index is part of a KV key and a message id). */
export const MAX_RUN_DOCUMENTS = 10_000_000;
const DocIndex = z.number().int().nonnegative().max(MAX_RUN_DOCUMENTS - 1);
const Count = z.number().int().nonnegative().max(1_000_000_000);
const Timestamp = z.string().max(64);
const Hex64 = z.string().regex(/^[0-9a-f]{64}$/);
/** A source as shown to users: an absolute path, a record id or a reference. */
const SourceName = z.string().min(1).max(4096);
const Reason = z.string().max(2048);
const Code = z.string().min(1).max(64);

/** The parse settings a worker applies to one document (the pipeline's parse stage, limits included). */
export const ParseTaskSettings = z.strictObject({
  ocr: z.enum(['auto', 'always', 'never']),
  ocrModel: z.string().min(1).max(1024),
  ocrDpi: z.number().int().min(36).max(600),
  /** Absent from a coordinator older than the option: it kept every line, and so does the worker. */
  furniture: z.enum(['drop', 'keep']).optional(),
  maxBytes: z.number().int().positive().max(2 ** 40),
  maxPages: z.number().int().positive().max(1_000_000),
});
export type ParseTaskSettings = z.infer<typeof ParseTaskSettings>;

/** One document to parse: its bytes by reference (obj://), published on `<prefix>.ingest.parse`. */
export const ParseTask = z.strictObject({
  v: z.literal(WIRE_VERSION),
  run_id: JobId,
  doc: DocIndex,
  source: SourceName,
  /** The record id of an inline source, when it had one. */
  id: z.string().max(512).optional(),
  /** The file name the coordinator read (a hint for the type, as in process: `.md` is Markdown). */
  name: z.string().min(1).max(4096).optional(),
  /** sha256 of the bytes: a worker checks what it read against it. */
  document_id: Hex64,
  ref: DataRef,
  /** Inline text records are parsed as text, whatever their bytes look like. */
  inline_text: z.boolean().optional(),
  parse: ParseTaskSettings,
  /**
   * A random secret of the coordinator for this task (128 bits, hex). The worker writes its
   * SHA-256 (`task` in the document status) and keeps the pages under it; the coordinator accepts
   * only statuses carrying the digest of a token it published, so a task someone else published
   * under its run id is never indexed. Absent from coordinators older than the field.
   */
  token: z.string().regex(/^[0-9a-f]{32}$/).optional(),
});
export type ParseTask = z.infer<typeof ParseTask>;

/** A parsed page as stored for the coordinator (the parse stage's ParsedPage). */
export const StoredPage = z.strictObject({
  page: z.number().int().min(1).max(1_000_000),
  text: z.string().max(64 * 1024 * 1024),
  ocr: z.boolean(),
  headings: z.array(z.strictObject({ offset: z.number().int().nonnegative(), text: z.string().max(4096) })).max(100_000).optional(),
  ocrReason: z.enum(['no-text', 'images', 'always', 'image-file']).optional(),
});
export type StoredPage = z.infer<typeof StoredPage>;

export const StoredPages = z.strictObject({
  v: z.literal(WIRE_VERSION),
  document_id: Hex64,
  type: z.enum(DOCUMENT_TYPES),
  pages: z.array(StoredPage).max(1_000_000),
  /** The title the reader found (PDF info, front matter, <title>, an email's subject…): the document's automatic `title` metadata. */
  title: z.string().max(4096).optional(),
});
export type StoredPages = z.infer<typeof StoredPages>;

export const DocumentState = z.enum(['queued', 'parsed', 'encoded', 'committed', 'failed']);
export type DocumentStateName = z.infer<typeof DocumentState>;

/** Per-document status in the ingest KV bucket, key `doc.<run>.<doc>`. */
export const DocumentStatus = z.strictObject({
  v: z.literal(WIRE_VERSION),
  run_id: JobId,
  doc: DocIndex,
  source: SourceName,
  document_id: Hex64,
  state: DocumentState,
  /** Set when `failed`: the document's own error code (DOCUMENT_ENCRYPTED...) and why. */
  code: Code.optional(),
  reason: Reason.optional(),
  pages: Count.optional(),
  ocr_pages: Count.optional(),
  chunks: Count.optional(),
  /** Where a parse worker stored the pages (StoredPages JSON), once `parsed`. */
  pages_ref: DataRef.optional(),
  /** SHA-256 of the task's `token`: which task this status answers (parse-task-token.ts). */
  task: Hex64.optional(),
  worker: z.string().max(512).optional(),
  updated_at: Timestamp,
});
export type DocumentStatus = z.infer<typeof DocumentStatus>;

export const IngestRunState = z.enum(['queued', 'running', 'completed', 'partial', 'failed']);

/** The status of one ingest run, key `run.<run>`: what `GET /v1/jobs/:id` answers for an ingest job. */
export const IngestRunStatus = z.strictObject({
  v: z.literal(WIRE_VERSION),
  job_id: JobId,
  kind: z.literal('ingest'),
  state: IngestRunState,
  pipeline: z.string().max(128),
  /** The configured index name (gateway) or the index location (CLI). */
  index: z.string().max(4096),
  documents: z.strictObject({ total: Count, ok: Count, failed: Count, unchanged: Count }),
  pages: Count,
  ocr_pages: Count,
  chunks: Count,
  /** The first failed documents (bounded). */
  failed: z.array(z.strictObject({ source: SourceName, code: Code, reason: Reason })).max(20),
  /** Why the run itself failed (not one document). */
  error: z.strictObject({ code: Code, message: Reason }).optional(),
  /**
   * Set while a store the run depends on is failing (the index refusing writes, S3 sources
   * unreadable): the run waits and retries instead of failing documents, and the mark is removed
   * once the store answers again. Independent of `state`.
   */
  degraded: Degraded.optional(),
  /** Documents deleted from the index because they left their folder (`"prune": true`; 0 without it), once the run is over. */
  removed: Count.optional(),
  /**
   * SHA-256 of what the submission decided (pipeline, index, sources, force, prune): the run id
   * names this content only; a resubmission with other content is JOB_CONFLICT.
   */
  content_hash: Hex64.optional(),
  /** The coordinator that owns the run (random per coordinator run): only it may write the status. */
  lease: z.string().min(1).max(64).optional(),
  /** When the coordinator last said it is alive, and how often it does (run-lease.ts). */
  heartbeat_at: Timestamp.optional(),
  heartbeat_ms: z.number().int().min(100).max(3_600_000).optional(),
  /**
   * A document-job run (docs/nats.md, "Document jobs"): how many documents its producer announced
   * (`<prefix>.runs.open`, or its own count). The run is `completed`/`partial`/`failed` once that
   * many documents ended; without it, it stays `running` and counts what ended.
   */
  expected: z.number().int().nonnegative().max(MAX_RUN_DOCUMENTS).optional(),
  /**
   * A document-job run: the ledger revision up to which ended documents are counted (workers add
   * the ledger's later records with a compare-and-set write, so each document counts once).
   */
  counted_seq: z.number().int().nonnegative().optional(),
  /** Set when the run was found without a heartbeat for RUN_ABANDONED_AFTER_BEATS × heartbeat_ms: `failed`, error TIMEOUT. */
  abandoned_at: Timestamp.optional(),
  created_at: Timestamp,
  updated_at: Timestamp,
});
export type IngestRunStatus = z.infer<typeof IngestRunStatus>;

/** A run whose coordinator has not written a heartbeat for this many intervals is abandoned. */
export const RUN_ABANDONED_AFTER_BEATS = 6;

/**
 * Why a queued or running run is abandoned (its coordinator died: no heartbeat within
 * RUN_ABANDONED_AFTER_BEATS × heartbeat_ms), or null. A status without a heartbeat (written
 * before heartbeats existed) is never judged.
 */
export function abandonedReason(status: IngestRunStatus, now: number): string | null {
  if (status.state !== 'queued' && status.state !== 'running') return null;
  if (status.heartbeat_at === undefined || status.heartbeat_ms === undefined) return null;
  const window = RUN_ABANDONED_AFTER_BEATS * status.heartbeat_ms;
  const silent = now - Date.parse(status.heartbeat_at);
  if (!(silent > window)) return null;
  return `abandoned: the run's coordinator sent no heartbeat for ${Math.round(silent)} ms (window ${window} ms; it died or lost NATS); resubmit the same run to start it again`;
}
