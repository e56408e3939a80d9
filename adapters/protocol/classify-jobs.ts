import { z } from 'zod';
import { ClassifyItem, ClassifyMethod, ClassifyResultTarget, type ClassifyRunStatus } from './classify.js';
import { DEFAULT_LIMITS } from './limits.js';
import { DataRef, JobId, WIRE_VERSION } from './jobs.js';
import { ItemId } from './requests.js';
import type { NatsNames } from './subjects.js';

/**
 * The public wire contract of classification jobs (docs/nats.md, "Classification jobs"): a
 * catalog is classified by `shoal worker --classify` processes, with no process coordinating the
 * run. A run is one **spec** stored once (the method: model, taxonomy text or labels, every
 * step's setting, and where the results go) and N **chunk messages** of products on
 * `<prefix>.classify.chunks`, then one **end message** on `<prefix>.classify.end` saying how many
 * chunks and products the run has. The workers classify each chunk, count it once in the run's
 * status (KV), and the worker that counts the last one writes the results, in catalog order, to
 * the run's result target. Every field is bounded; every object is strict.
 */

/** Products in one chunk message (or its `items_ref` object). */
export const MAX_CHUNK_ITEMS = 10_000;
/** Chunks of one run: the status keeps a bitmap of the counted ones (chunks/8 bytes). */
export const MAX_CLASSIFY_CHUNKS = DEFAULT_LIMITS.maxJobParts;
/** Products one chunk holds when the producer does not say (Shoal's producers). */
export const DEFAULT_CHUNK_ITEMS = 256;

const Timestamp = z.string().min(1).max(64);
const Count = z.number().int().nonnegative().max(1_000_000_000);
const ChunkIndex = z.number().int().nonnegative().max(MAX_CLASSIFY_CHUNKS - 1);
const Hex64 = z.string().regex(/^[0-9a-f]{64}$/);
const WireError = z.strictObject({ code: z.string().min(1).max(64), message: z.string().max(2_048) });

/**
 * What a run classifies with, stored once at `spec_ref` (Shoal's producers:
 * `obj://<p>_payloads/classify/<run>/spec.json`): the request of `POST /v1/classify` without its
 * items, and where the results go (default: `obj://<p>_payloads/classify/<run>/results.jsonl`).
 * It names no run: several runs may share one spec (each with the default target).
 */
export const ClassifyJobSpec = z.strictObject({
  v: z.literal(WIRE_VERSION),
  request: ClassifyMethod,
  /** One JSON Lines object: `obj://bucket/name`, `s3://bucket/key` or `file:///abs/path` inside the workers' file roots. */
  result: ClassifyResultTarget.optional(),
  created_at: Timestamp,
});
export type ClassifyJobSpec = z.output<typeof ClassifyJobSpec>;

/**
 * A product that has no text to classify (the CLI's `--fields` all empty): its line is written as
 * it is, `{"id", "error"}`, in its place.
 */
export const ClassifyErrorItem = z.strictObject({ id: ItemId, error: WireError });
export type ClassifyErrorItem = z.infer<typeof ClassifyErrorItem>;

/** A product of a chunk: text (and an optional image) to classify, or an error line kept in its place. */
export const ClassifyChunkItem = z.union([ClassifyErrorItem, ClassifyItem]);
export type ClassifyChunkItem = z.output<typeof ClassifyChunkItem>;

export const ClassifyChunkItems = z.array(ClassifyChunkItem).min(1).max(MAX_CHUNK_ITEMS);

/** Chunk `chunk` of a run, on `<prefix>.classify.chunks` with `Nats-Msg-Id: <run_id>.<chunk>`. */
export const ClassifyChunk = z
  .strictObject({
    v: z.literal(WIRE_VERSION),
    run_id: JobId,
    /** 0-based; the results are chunk 0's lines, then chunk 1's, and so on. */
    chunk: ChunkIndex,
    spec_ref: DataRef,
    /** The position of the chunk's first product in the catalog: a product without `id` gets its position as id. */
    first_index: Count,
    /** The products inline, or `items_ref`: a JSON array of them in the object store (a chunk over the message limit). */
    items: ClassifyChunkItems.optional(),
    items_ref: DataRef.optional(),
    submitted_at: Timestamp,
  })
  .refine((chunk) => (chunk.items === undefined) !== (chunk.items_ref === undefined), { message: 'give items or items_ref (exactly one)', path: ['items'] });
export type ClassifyChunk = z.output<typeof ClassifyChunk>;

/** The end of a run's publishing, on `<prefix>.classify.end` with `Nats-Msg-Id: <run_id>.end`: the run completes once that many chunks are done. */
export const ClassifyRunEnd = z.strictObject({
  v: z.literal(WIRE_VERSION),
  run_id: JobId,
  spec_ref: DataRef,
  chunks: z.number().int().min(1).max(MAX_CLASSIFY_CHUNKS),
  items: Count,
  submitted_at: Timestamp,
});
export type ClassifyRunEnd = z.infer<typeof ClassifyRunEnd>;

/**
 * A run's status as the classify workers keep it (KV key `classify.<run>` in the ingest bucket),
 * changed only by compare-and-set. `assembling`: every chunk is counted and one worker writes the
 * results (answered as `running`); `counted`: a base64 bitmap of the counted chunks (bit i =
 * chunk i), so a chunk done twice (a redelivery after a kill) counts once.
 */
export const ClassifyJobRecord = z.strictObject({
  v: z.literal(WIRE_VERSION),
  job_id: JobId,
  kind: z.literal('classify'),
  state: z.enum(['queued', 'running', 'assembling', 'completed', 'failed']),
  model: z.string().max(1_024),
  /** Products of the run: the producer's count, or those counted so far until the end message. */
  items: Count,
  items_done: Count,
  categories: Count.nullable(),
  error: WireError.nullable(),
  /** Null until the end message (or a producer that knew it) said how many. */
  chunks: z.number().int().min(1).max(MAX_CLASSIFY_CHUNKS).nullable(),
  chunks_done: Count,
  counted: z
    .string()
    .max(Math.ceil(Math.ceil(MAX_CLASSIFY_CHUNKS / 8) / 3) * 4)
    .regex(/^[A-Za-z0-9+/]*={0,2}$/),
  spec_ref: DataRef,
  result: DataRef,
  /** sha256 of what was submitted (Shoal's producers): a resubmitted id is the same run only with the same content. */
  content_hash: Hex64.optional(),
  created_at: Timestamp,
  updated_at: Timestamp,
  finished_at: Timestamp.optional(),
});
export type ClassifyJobRecord = z.infer<typeof ClassifyJobRecord>;

/** The status `GET /v1/jobs/:id` answers: the record without its bookkeeping, `assembling` shown as `running`. */
export function publicClassifyStatus(record: ClassifyJobRecord): ClassifyRunStatus {
  return {
    job_id: record.job_id,
    kind: 'classify',
    state: record.state === 'assembling' ? 'running' : record.state,
    model: record.model,
    items: Math.max(record.items, record.items_done),
    items_done: record.items_done,
    categories: record.categories,
    error: record.error,
    chunks: record.chunks,
    chunks_done: record.chunks_done,
    result: record.result,
    created_at: record.created_at,
    updated_at: record.updated_at,
  };
}

/** The names of the classification-job topology (docs/nats.md). */
export interface ClassifyJobNames {
  /** Work-queue stream: `<prefix>.classify.>`. */
  stream: string;
  chunks: string;
  end: string;
  allSubjects(): string;
  /** The one durable pull consumer every classify worker shares (what KEDA scales the pool on). */
  consumer: string;
  deadLetter: string;
  /** Object names in the payload bucket. */
  specObject(runId: string): string;
  itemsObject(runId: string, chunk: number): string;
  chunkObject(runId: string, chunk: number): string;
  resultsObject(runId: string): string;
  /** A category matrix (`.f32`) and its description (`.json`), by the category cache key. */
  categoriesObject(key: string): string;
}

export function classifyJobNames(names: NatsNames): ClassifyJobNames {
  const p = names.prefix;
  const upper = names.jobsStream.replace(/_JOBS$/, '');
  const lower = names.statusBucket.replace(/_jobs$/, '');
  return Object.freeze({
    stream: `${upper}_CLASSIFY`,
    chunks: `${p}.classify.chunks`,
    end: `${p}.classify.end`,
    allSubjects: () => `${p}.classify.>`,
    consumer: `${lower}_classify`,
    deadLetter: `${p}.dlq.classify`,
    specObject: (runId: string) => `classify/${runId}/spec.json`,
    itemsObject: (runId: string, chunk: number) => `classify/${runId}/items-${chunk}.json`,
    chunkObject: (runId: string, chunk: number) => `classify/${runId}/chunk-${chunk}.jsonl`,
    resultsObject: (runId: string) => `classify/${runId}/results.jsonl`,
    categoriesObject: (key: string) => `classify/categories/${key}`,
  });
}

/** The message id of a chunk: repeats within the duplicate window are stored once. */
export function classifyChunkMessageId(runId: string, chunk: number): string {
  return `${runId}.${chunk}`;
}

export function classifyEndMessageId(runId: string): string {
  return `${runId}.end`;
}
