import { z } from 'zod';
import { ErrorCode } from './errors.js';
import { DEFAULT_LIMITS } from './limits.js';
import { Dimensions, EmbeddingDtype } from './output-types.js';
import { EncodeRequest, ExtractRequest, ScoreRequest } from './requests.js';
import { EncodeResult, ExtractResult, ScoreResult, TokenizeResult } from './results.js';
import { JOB_ID_PATTERN, PRIMITIVES } from './subjects.js';

/**
 * Versioned wire schemas of jobs, their results, their status and request-reply calls, shared by
 * the gateway, the workers and `shoal submit`. A job is split into parts (each one NATS message
 * under the server's max_payload); a part whose request is still too large travels by reference
 * (`payload_ref`, an object-store or S3 URI) instead of inline.
 */

export const WIRE_VERSION = 1;

/**
 * Bounds of the numbers a job message carries, sized to what they cost a worker: a part number
 * indexes the status bitmap (parts/8 bytes), an offset shifts result indexes, an item count is
 * stored. A message over them is poison: dead-lettered once with INVALID_INPUT, never retried.
 */
const PartCount = z.number().int().min(1).max(DEFAULT_LIMITS.maxJobParts);
const PartIndex = z.number().int().nonnegative().max(DEFAULT_LIMITS.maxJobParts - 1);
const ItemOffset = z.number().int().nonnegative().max(DEFAULT_LIMITS.maxItemsPerRequest);
const ItemCount = z.number().int().nonnegative().max(DEFAULT_LIMITS.maxItemsPerRequest);
/** An ISO-8601 timestamp as Shoal writes it (bounded so a forged one cannot carry a payload). */
const Timestamp = z.string().max(64);

/**
 * A store a job or an ingest run writes to (or reads from) is failing now: what fails and since
 * when. The work waits and retries (nothing is lost); the mark goes once the store answers again.
 */
export const Degraded = z.strictObject({ reason: z.string().max(1000), since: Timestamp });
export type Degraded = z.infer<typeof Degraded>;

/** The primitive of a job (schema; the type is `Primitive` from subjects.ts). */
export const PrimitiveSchema = z.enum(PRIMITIVES);
export const JobId = z.string().regex(JOB_ID_PATTERN, 'job ids are 1-64 characters of A-Z a-z 0-9 _ -');

/** A URI of stored data: `obj://<bucket>/<name>` (NATS object store), `s3://bucket/key`, `file:///path`. */
export const DataRef = z.string().regex(/^(obj|s3|file):\/\/\S+$/, 'references are obj://, s3:// or file:// URIs').max(2048);

/** A configured index's name (SHOAL_INDEXES `name=target`). */
export const IndexName = z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'index names are 1-64 characters of A-Z a-z 0-9 _ -');

/** Where the results of a job go. */
export const ResultTarget = z.discriminatedUnion('kind', [
  /**
   * Published on the results stream, one message per part (large ones by reference). Vectors are
   * float32-packed (`f32`, the default: header `Shoal-Body: f32-v1`, docs/nats.md) or JSON numbers
   * (`json`, for consumers that read the stream without Shoal's client).
   */
  z.strictObject({ kind: z.literal('stream'), vectors: z.enum(['f32', 'json']).optional() }),
  /** Written as JSON Lines under a store URI, one object per part (`<uri>/<job_id>/part-<n>.jsonl`). */
  z.strictObject({ kind: z.literal('store'), uri: DataRef }),
  /**
   * Rows of a vector store (encode jobs): `index` NAMES one of the indexes the operator configured
   * (SHOAL_INDEXES on the gateway and the results sink), never a URI or a path, so a remote caller
   * cannot make Shoal write anywhere else. Results travel on the stream; `shoal sink` writes them.
   */
  z.strictObject({ kind: z.literal('index'), index: IndexName }),
]);
export type ResultTarget = z.infer<typeof ResultTarget>;

const PrimitiveRequest = z.union([EncodeRequest, ScoreRequest, ExtractRequest]);

export const JobPart = z
  .strictObject({
    v: z.literal(WIRE_VERSION),
    job_id: JobId,
    part: PartIndex,
    parts: PartCount,
    primitive: PrimitiveSchema,
    model: z.string().min(1).max(1024),
    /** The primitive's request (its `model` equals the part's model); absent when payload_ref is set. */
    request: z.unknown().optional(),
    payload_ref: DataRef.optional(),
    /** Index of the part's first item in the job's request: workers add it to result indexes. @default 0 */
    offset: ItemOffset.optional(),
    result: ResultTarget,
    submitted_at: Timestamp,
  })
  .refine((part) => (part.request === undefined) !== (part.payload_ref === undefined), 'a job part carries either request or payload_ref')
  .refine((part) => part.part < part.parts, 'part must be below parts');
export type JobPart = z.infer<typeof JobPart>;

/** The request schema of each primitive, for validating a part's request after the envelope. */
export const REQUEST_SCHEMAS = { encode: EncodeRequest, score: ScoreRequest, extract: ExtractRequest } as const;

export const WireError = z.strictObject({
  code: z.enum(Object.values(ErrorCode) as [ErrorCode, ...ErrorCode[]]),
  message: z.string(),
  details: z.record(z.string(), z.unknown()).optional(),
  cause: z.string().optional(),
});

export const PrimitiveResult = z.union([EncodeResult, ScoreResult, ExtractResult]);

export const JobPartResult = z.strictObject({
  v: z.literal(WIRE_VERSION),
  job_id: JobId,
  part: PartIndex,
  parts: PartCount,
  primitive: PrimitiveSchema,
  model: z.string().max(1024),
  status: z.enum(['ok', 'error']),
  result: PrimitiveResult.optional(),
  /**
   * The output type and Matryoshka dimensions the encode request asked for (absent: float32, the
   * model's dimension): the dense vectors hold that type's values, and an index target stores them
   * as that type (docs/storage.md).
   */
  dtype: EmbeddingDtype.optional(),
  dimensions: Dimensions.optional(),
  /** Set instead of `result` when the result was stored (too large, or a store target). */
  result_ref: DataRef.optional(),
  error: WireError.optional(),
  worker: z.string().max(512),
  finished_at: Timestamp,
});
export type JobPartResult = z.infer<typeof JobPartResult>;

export const JobState = z.enum(['queued', 'running', 'completed', 'failed', 'partial']);
export type JobState = z.infer<typeof JobState>;

/** Status in the KV bucket (key = job id), updated with compare-and-set by whoever finishes a part. */
export const JobStatus = z.strictObject({
  v: z.literal(WIRE_VERSION),
  job_id: JobId,
  state: JobState,
  primitive: PrimitiveSchema,
  model: z.string().max(1024),
  parts: PartCount,
  parts_done: z.number().int().nonnegative().max(DEFAULT_LIMITS.maxJobParts),
  parts_failed: z.number().int().nonnegative().max(DEFAULT_LIMITS.maxJobParts),
  /** Items over all parts. */
  items: ItemCount,
  /** The first errors (bounded). */
  errors: z.array(WireError.extend({ part: PartIndex })).max(20),
  /** Parts already counted, as a base64 bitmap (bit i = part i): a redelivered part is counted once. */
  counted_parts: z
    .string()
    .max(Math.ceil(Math.ceil(DEFAULT_LIMITS.maxJobParts / 8) / 3) * 4)
    .regex(/^[A-Za-z0-9+/]*={0,2}$/)
    .optional(),
  result: ResultTarget,
  /**
   * SHA-256 (hex) of what was submitted (primitive, request, result target, part size): a
   * resubmission of the same id is the same job only when this matches (else JOB_CONFLICT).
   * Absent on statuses written before it existed, or recreated by a worker from a part.
   */
  content_hash: z.string().regex(/^[0-9a-f]{64}$/).optional(),
  /** Set once every part is published: a job without it past its deadline ended mid-submit. */
  submitted: z.boolean().optional(),
  /** After this instant (ISO-8601) an unfinished job is ended `failed`/`partial` with TIMEOUT. */
  deadline_at: Timestamp.optional(),
  /**
   * Set while the results sink cannot write this job's results into its vector store (down,
   * refusing): the results wait on the stream and are written once it recovers. Independent of
   * `state` (the parts may be computed already); removed at the first successful write.
   */
  degraded: Degraded.optional(),
  created_at: Timestamp,
  updated_at: Timestamp,
});
export type JobStatus = z.infer<typeof JobStatus>;

/** Request-reply answer (core NATS), for the sync path. */
export const RpcReply = z.discriminatedUnion('ok', [
  z.strictObject({ ok: z.literal(true), result: z.union([PrimitiveResult, TokenizeResult]), worker: z.string() }),
  z.strictObject({ ok: z.literal(false), error: WireError, worker: z.string().optional() }),
]);
export type RpcReply = z.infer<typeof RpcReply>;

/**
 * The reply as a client reads it: the envelope checked, the result left for the one schema of the
 * operation the client called (checking it against every result schema first would parse the
 * vectors twice on the latency path).
 */
export const RpcReplyEnvelope = z.discriminatedUnion('ok', [
  z.strictObject({ ok: z.literal(true), result: z.unknown(), worker: z.string() }),
  z.strictObject({ ok: z.literal(false), error: WireError, worker: z.string().optional() }),
]);

/** Headers on messages of the dead-letter stream (the body is the original message, unchanged). */
export const DEAD_LETTER_HEADERS = Object.freeze({
  reason: 'Shoal-Dead-Reason',
  code: 'Shoal-Dead-Code',
  subject: 'Shoal-Original-Subject',
  sequence: 'Shoal-Original-Sequence',
  deliveries: 'Shoal-Deliveries',
  /** The original's Nats-Msg-Id (`<job>.<part>`), which the copy cannot carry as its own id. */
  messageId: 'Shoal-Original-Msg-Id',
});

export { PrimitiveRequest };

/** A worker's answer on the discovery subject (`natsNames().workers()`). */
export const WorkerInfo = z.strictObject({
  v: z.literal(WIRE_VERSION),
  worker: z.string(),
  /** Models it serves (pulls jobs for and answers requests on). */
  serves: z.array(z.string()),
  /** Models loaded now. */
  resident: z.array(z.string()),
  /**
   * The primitives it answers per served model, so a gateway can refuse at submit a job for an
   * operation the model lacks (it would wait for a worker that never comes). Absent from workers
   * before it was added: then any primitive is let through.
   */
  operations: z.record(z.string().max(1024), z.array(PrimitiveSchema).max(8)).optional(),
});
export type WorkerInfo = z.infer<typeof WorkerInfo>;

/** What a client submits as one job (HTTP `POST /v1/jobs`, `shoal submit`); split into parts by the jobs client. */
export const JobSubmission = z.strictObject({
  /** Client-chosen id makes submission idempotent (JetStream deduplicates by part message id). */
  job_id: JobId.optional(),
  primitive: PrimitiveSchema,
  /** The primitive's request; large item lists are split into parts. */
  request: z.record(z.string(), z.unknown()),
  result: ResultTarget.default({ kind: 'stream' }),
  /** Items per part (default chosen by the jobs client so a part fits the message size limit). */
  part_items: z.number().int().min(1).max(100_000).optional(),
});
export type JobSubmission = z.input<typeof JobSubmission>;

export interface SubmittedJob {
  job_id: string;
  parts: number;
  items: number;
  status: JobStatus;
}

/** Asynchronous jobs: implemented over JetStream (adapters/nats), used by the gateway and the CLI. */
export interface JobsApi {
  submit(submission: JobSubmission): Promise<SubmittedJob>;
  /** null when no job has that id. */
  status(jobId: string): Promise<JobStatus | null>;
  /** Each part's result in part order, stored references read and packed vectors decoded (absent: results cannot be read back). */
  results?(jobId: string): AsyncIterable<JobPartResult>;
  /**
   * Refuses a model no worker serves (or served) for `primitive`, as a submission would be refused
   * (MODEL_NOT_FOUND, UNSUPPORTED_OPERATION); an ingest run checks its models with it before it
   * starts. Required: a JobsApi that forgot it would let an ingest run name any model.
   */
  checkModel(primitive: z.infer<typeof PrimitiveSchema>, model: string): Promise<void>;
}
