import { z } from 'zod';
import { DEFAULT_LIMITS } from './limits.js';
import { DataRef, JobId } from './jobs.js';
import { ImageSource, ItemId, ModelRef } from './requests.js';

/**
 * Wire schemas of taxonomy classification (`POST /v1/classify`, the `classify()` API): products
 * (text, optionally an image) in, one category of a taxonomy (or of a label list) per product out,
 * with its score, alternatives, what decided it and whether a person should review it.
 */

/** Characters of taxonomy text accepted inline (the 10,595-category Shopify file is ~1 MB). */
export const MAX_TAXONOMY_CHARS = 8 * 1024 * 1024;
/** Categories returned per product (the category plus top_k − 1 alternatives). */
export const MAX_CLASSIFY_TOP_K = 100;
/** Candidates retrieved for reranking, image fusion or the hierarchy vote. */
export const MAX_CLASSIFY_CANDIDATES = 1_000;

/** A product's text: blank text has no meaning to classify (the CLI answers such a product with an error line too). */
const Text = z
  .string()
  .max(DEFAULT_LIMITS.maxTextChars)
  .refine((text) => text.trim() !== '', { message: 'is blank: a product needs text to classify' });

export const ClassifyItem = z.union([Text, z.strictObject({ id: ItemId.optional(), text: Text, image: ImageSource.optional() })]).transform(
  (value): { id?: ItemId | undefined; text: string; image?: ImageSource | undefined } => (typeof value === 'string' ? { text: value } : value),
);
export type ClassifyItem = z.output<typeof ClassifyItem>;

const Top = z.number().int().min(1).max(MAX_CLASSIFY_CANDIDATES);

/**
 * How to classify, without the products: the model, the taxonomy (or labels) and every step's
 * setting. A classification job's spec (classify-jobs.ts) is this, stored once per run.
 */
const METHOD_FIELDS = {
  /** Taxonomy file text (Shopify `gid : A > B`, Google `id - A > B`, or one path per line). */
  taxonomy: z.string().min(1).max(MAX_TAXONOMY_CHARS).optional(),
  /** Or a flat list of labels. */
  labels: z.array(z.string().min(1).max(DEFAULT_LIMITS.maxLabelChars)).min(1).max(DEFAULT_LIMITS.maxItemsPerRequest).optional(),
  /** Keep taxonomy categories down to this depth. */
  max_depth: z.number().int().min(1).max(64).optional(),
  /** Categories returned per product: the best plus top_k − 1 alternatives. @default 5 */
  top_k: z.number().int().min(1).max(MAX_CLASSIFY_TOP_K).optional(),
  /** Candidates retrieved before rerank / image fusion / hierarchy vote. @default max(top_k, rerank top, 20 with hierarchy or image) */
  candidates: Top.optional(),
  /** Cross-encoder that reranks the best candidates (a model, or the model and how many). */
  rerank: z.union([ModelRef, z.strictObject({ model: ModelRef, top: Top.optional() })]).optional(),
  /** Keep the chosen path consistent: each level is the branch the candidates vote for. @default false */
  hierarchy: z.boolean().optional(),
  /** Below this score a product is marked needs_review. @default 0.5 */
  threshold: z.number().min(-1e6).max(1e6).optional(),
  /** CLIP-style model whose image–category similarity is fused with the text similarity (items with `image`). */
  image_model: ModelRef.optional(),
  /** Weight of the image similarity in the fused score. @default 0.3 */
  image_weight: z.number().min(0).max(1).optional(),
  /** Category text: `{path}`, `{name}`, `{id}`. @default '{path}' */
  category_template: z.string().min(1).max(DEFAULT_LIMITS.maxLabelChars).optional(),
  max_length: z.number().int().min(1).max(DEFAULT_LIMITS.maxSequenceLength).optional(),
};

const oneTaxonomy = { message: 'give taxonomy or labels (exactly one)', path: ['taxonomy'] };
const hasOneTaxonomy = (request: { taxonomy?: string | undefined; labels?: readonly string[] | undefined }): boolean => (request.taxonomy === undefined) !== (request.labels === undefined);

export const ClassifyMethod = z
  .strictObject({
    /** Dense embedding model for products and categories. */
    model: ModelRef,
    ...METHOD_FIELDS,
  })
  .refine(hasOneTaxonomy, oneTaxonomy);
export type ClassifyMethod = z.output<typeof ClassifyMethod>;

export const ClassifyRequest = z
  .strictObject({
    /** Dense embedding model for products and categories. */
    model: ModelRef,
    items: z.array(ClassifyItem).min(1, 'items must not be empty').max(DEFAULT_LIMITS.maxItemsPerRequest),
    ...METHOD_FIELDS,
  })
  .refine(hasOneTaxonomy, oneTaxonomy);
export type ClassifyRequest = z.input<typeof ClassifyRequest>;
export type ParsedClassifyRequest = z.output<typeof ClassifyRequest>;

export const DecidedBy = z.enum(['retrieve', 'rerank']);
export type DecidedBy = z.infer<typeof DecidedBy>;

export const CategoryScore = z.strictObject({ id: z.string(), path: z.string(), score: z.number() });
export type CategoryScore = z.infer<typeof CategoryScore>;

export const Classification = z.strictObject({
  id: ItemId,
  category: z.strictObject({ id: z.string(), path: z.string() }),
  score: z.number(),
  alternatives: z.array(CategoryScore),
  decided_by: DecidedBy,
  needs_review: z.boolean(),
});
export type Classification = z.infer<typeof Classification>;

export const ClassifyResult = z.strictObject({
  model: z.string(),
  /** Categories in the taxonomy (after max_depth). */
  categories: z.number().int().nonnegative(),
  items: z.array(Classification),
});
export type ClassifyResult = z.infer<typeof ClassifyResult>;

/**
 * How `POST /v1/classify` runs: `auto` answers synchronously up to the gateway's sync limit and as
 * a job above it, `sync` never makes a job (413 above the limit), `job` always does (202).
 */
export const ClassifyMode = z.enum(['auto', 'sync', 'job']);
export type ClassifyMode = z.infer<typeof ClassifyMode>;

/**
 * Where a classification job's results go: one object, `obj://bucket/name`, `s3://bucket/key` or
 * `file:///path/file.jsonl` (not a folder or a bare bucket: the results are one JSON Lines object).
 */
export const ClassifyResultTarget = DataRef.refine((uri) => !uri.endsWith('/') && !/^(obj|s3):\/\/[^/]+$/.test(uri), {
  message: 'a result target names one object: obj://bucket/name, s3://bucket/key or file:///path/results.jsonl',
});

/** The HTTP body: a classify request plus how to run it; a `job_id` implies the job form (idempotent resubmission). */
export const ClassifyHttpRequest = ClassifyRequest.safeExtend({
  /** @default 'auto' */
  mode: ClassifyMode.optional(),
  /** Client-chosen job id: the same id with the same content is the same run; with other content, 409 JOB_CONFLICT. */
  job_id: JobId.optional(),
  /**
   * Where a job's JSON Lines results are written (`obj://`, `s3://`, `file://` inside the workers'
   * file roots): only for jobs run by the classify workers (SHOAL_CLASSIFY_JOBS). @default the
   * object store, read back with GET /v1/jobs/<id>/results
   */
  result: ClassifyResultTarget.optional(),
});
export type ParsedClassifyHttpRequest = z.output<typeof ClassifyHttpRequest>;

export const ClassifyRunState = z.enum(['queued', 'running', 'completed', 'failed']);
export type ClassifyRunState = z.infer<typeof ClassifyRunState>;

const Count = z.number().int().nonnegative().max(1_000_000_000);

/** What `GET /v1/jobs/:id` answers for a classification job (a `POST /v1/classify` run, in the gateway or as classify jobs). */
export const ClassifyRunStatus = z.strictObject({
  job_id: JobId,
  kind: z.literal('classify'),
  state: ClassifyRunState,
  model: z.string().max(1_024),
  items: Count,
  items_done: Count,
  /** Categories of the taxonomy, once its matrix is built; null before. */
  categories: Count.nullable(),
  /** Why the run failed; null otherwise. */
  error: z.strictObject({ code: z.string().min(1).max(64), message: z.string().max(2_048) }).nullable(),
  /** Jobs run by the classify workers (SHOAL_CLASSIFY_JOBS): chunks of the catalog, null until the producer said how many. */
  chunks: Count.nullable().optional(),
  chunks_done: Count.optional(),
  /** Jobs run by the classify workers: where the JSON Lines results are written (`obj://`, `s3://`, `file://`). */
  result: z.string().max(4_096).optional(),
  created_at: z.string().max(64),
  updated_at: z.string().max(64),
});
export type ClassifyRunStatus = z.infer<typeof ClassifyRunStatus>;

/** The 202 answer of a classification job: where its status and results are read. */
export const ClassifyJobAccepted = z.strictObject({
  job_id: JobId,
  status_url: z.string().max(256),
  results_url: z.string().max(256),
  status: ClassifyRunStatus,
});
export type ClassifyJobAccepted = z.infer<typeof ClassifyJobAccepted>;
