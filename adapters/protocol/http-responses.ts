import { z } from 'zod';
import { ClassifyJobAccepted, ClassifyResult, ClassifyRunStatus } from './classify.js';
import { ErrorCode } from './errors.js';
import { IngestRunStatus } from './ingest.js';
import { JobStatus } from './jobs.js';
import { DocumentMetadataSchema } from './metadata.js';
import { EncodedItem, EncodeResult } from './results.js';

/**
 * The bodies the HTTP gateway answers that are not a primitive's wire result (results.ts): the
 * error body, the probes, the OpenAI and TEI compatible shapes, search hits, accepted jobs. They
 * describe the answers in /openapi.json (services/gateway/openapi/) and a test checks every
 * route's real answers against them, so a route that changes its shape without its schema fails.
 */

/** Every refusal: `{error: {code, message, details?}}`, code one of ErrorCode's. */
export const ErrorResponse = z.strictObject({
  error: z.strictObject({
    code: z.enum(Object.values(ErrorCode) as [ErrorCode, ...ErrorCode[]]),
    message: z.string(),
    details: z.record(z.string(), z.unknown()).optional(),
  }),
});

export const HealthResponse = z.strictObject({ status: z.literal('ok') });
export const ReadyResponse = z.strictObject({ status: z.literal('ready') });

/** One entry of GET /v1/models: OpenAI's model object plus Shoal's facts. */
export const ModelEntry = z.strictObject({
  id: z.string(),
  object: z.literal('model'),
  created: z.number().int(),
  owned_by: z.string(),
  family: z.string().optional(),
  primitives: z.array(z.string()).optional(),
  resident: z.boolean().optional(),
});
export const ModelList = z.strictObject({ object: z.literal('list'), data: z.array(ModelEntry) });

/** POST /v1/embeddings, OpenAI's shape; `embedding` is base64 of float32 with `encoding_format: "base64"`. */
export const OpenAiEmbeddings = z.strictObject({
  object: z.literal('list'),
  data: z.array(z.strictObject({ object: z.literal('embedding'), index: z.number().int(), embedding: z.union([z.array(z.number()), z.string()]) })),
  model: z.string(),
  usage: z.strictObject({ prompt_tokens: z.number().int(), total_tokens: z.number().int() }),
});

/** POST /v1/encode: the EncodeResult, with dense vectors as base64 strings under `encoding_format: "base64"`. */
export const HttpEncodeResult = EncodeResult.extend({
  items: z.array(EncodedItem.extend({ dense: z.union([z.array(z.number()), z.string().describe('base64 of the packed values in the requested dtype')]).optional() })),
});

export const TeiEmbeddings = z.array(z.array(z.number()));
export const TeiRerankHits = z.array(z.strictObject({ index: z.number().int(), score: z.number(), text: z.string().optional() }));
export const TeiSparseEmbeddings = z.array(z.array(z.strictObject({ index: z.number().int(), value: z.number() })));
export const TeiTokens = z.array(
  z.array(z.strictObject({ id: z.number().int(), text: z.string(), special: z.boolean(), start: z.number().int().nullable(), stop: z.number().int().nullable() })),
);
export const TeiInfoResponse = z.strictObject({
  model_id: z.string(),
  model_sha: z.null(),
  model_dtype: z.string(),
  served_model_name: z.string(),
  model_type: z.union([
    z.strictObject({ embedding: z.strictObject({ pooling: z.string() }) }),
    z.strictObject({ reranker: z.strictObject({ id2label: z.record(z.string(), z.string()), label2id: z.record(z.string(), z.number()) }) }),
  ]),
  max_concurrent_requests: z.number().int(),
  max_input_length: z.number().int(),
  max_batch_tokens: z.number().int(),
  max_batch_requests: z.null(),
  max_client_batch_size: z.number().int(),
  auto_truncate: z.boolean(),
  tokenization_workers: z.null(),
  version: z.string(),
  sha: z.null(),
  docker_label: z.null(),
});

/** One hit of POST /v1/search: a line `shoal search` prints. */
export const SearchHitLine = z.strictObject({
  rank: z.number().int(), score: z.number(), id: z.string(), document_id: z.string(), source: z.string(), page: z.number().int(), text: z.string(),
  heading: z.string().nullable(), chunk: z.number().int(), start: z.number().int(), end: z.number().int(),
  metadata: DocumentMetadataSchema.nullable(),
});

/** One document of POST /v1/search with `group_by: "document"`: its best chunk's score, its best chunks. */
export const SearchDocumentLine = z.strictObject({ rank: z.number().int(), score: z.number(), document_id: z.string(), source: z.string(), hits: z.array(SearchHitLine) });

/** POST /v1/search: the lines `shoal search` prints (`hits`), or per document with `group_by` (`documents`). */
export const SearchResponse = z.union([z.strictObject({ hits: z.array(SearchHitLine) }), z.strictObject({ documents: z.array(SearchDocumentLine) })]);

/** Where a job's results can be read (jobs.ts `resultLocation`). */
export const ResultLocation = z.union([
  z.strictObject({ kind: z.literal('stream'), stream: z.string(), subject: z.string(), vectors: z.string() }),
  z.strictObject({ kind: z.literal('index'), index: z.string() }),
  z.strictObject({ kind: z.literal('store'), uri: z.string(), files: z.string() }),
]);

/** A job's status as clients see it: the bookkeeping fields stay inside. */
export const PublicJobStatus = JobStatus.omit({ counted_parts: true, content_hash: true, submitted: true });

export const Links = z.strictObject({ self: z.string(), results: z.string().optional() });

/** POST /v1/jobs, 202. */
export const JobAccepted = z.strictObject({
  job_id: z.string(),
  parts: z.number().int(),
  items: z.number().int(),
  status: PublicJobStatus,
  links: Links,
  results: ResultLocation,
});

/** GET /v1/jobs/:id: a primitive job, a classification job or an ingest run. */
export const JobStatusResponse = z.union([
  PublicJobStatus.extend({ results: ResultLocation }),
  ClassifyRunStatus.extend({ links: Links }),
  IngestRunStatus,
]);

/** POST /v1/ingest, 202 (or 200 with `?wait=true` once the run finished). */
export const IngestAccepted = z.strictObject({ job_id: z.string(), status: IngestRunStatus, links: z.strictObject({ self: z.string() }) });

/** POST /v1/classify: the result (sync) or the accepted job (202). */
export const ClassifyResponse = z.union([ClassifyResult, ClassifyJobAccepted]);

/** GET /v1/jobs: the jobs this gateway accepted lately, the newest first, each as GET /v1/jobs/:id answers it. */
export const JobListResponse = z.strictObject({ jobs: z.array(JobStatusResponse) });
