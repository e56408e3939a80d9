import { z } from 'zod';
import { ClassifyHttpRequest } from '../../../adapters/protocol/classify.js';
import { ErrorCode } from '../../../adapters/protocol/errors.js';
import {
  ClassifyResponse,
  HealthResponse,
  HttpEncodeResult,
  IngestAccepted,
  JobAccepted,
  JobListResponse,
  JobStatusResponse,
  ModelEntry,
  ModelList,
  OpenAiEmbeddings,
  ReadyResponse,
  SearchResponse,
  TeiEmbeddings,
  TeiInfoResponse,
  TeiRerankHits,
  TeiSparseEmbeddings,
  TeiTokens,
} from '../../../adapters/protocol/http-responses.js';
import { JobSubmission } from '../../../adapters/protocol/jobs.js';
import { ExtractRequest, ScoreRequest, TokenizeRequest } from '../../../adapters/protocol/requests.js';
import { ExtractResult, ScoreResult, TokenizeResult } from '../../../adapters/protocol/results.js';
import { EncodeQuery, ExtractQuery } from '../routes/image-body.js';
import { IngestBody, IngestQuery } from '../routes/ingest.js';
import { DeleteDocumentQuery, DocumentsQuery, IndexDeleted, IndexDocumentsPage, IndexList, IndexStats, IndexTables } from '../../../adapters/protocol/index-admin.js';
import { UploadFields } from '../routes/ingest-form.js';
import { MAX_UPLOAD_FILES } from '../ingest-upload.js';
import { MAX_DOCUMENT_BYTES } from '../../../adapters/protocol/limits.js';
import { EmbeddingsBody } from '../routes/openai.js';
import { HttpEncodeRequest } from '../routes/primitives.js';
import { SearchBody } from '../routes/search.js';
import { JobListQuery } from '../routes/jobs.js';
import { TeiEmbedBody, TeiRerankBody } from '../routes/tei.js';
import { TeiSparseBody } from '../routes/tei-sparse.js';
import { TeiTokenizeBody } from '../routes/tei-tokenize.js';

/**
 * Every route the gateway serves, as /openapi.json describes it: the zod schemas here are the
 * ones the routes parse with (exported from routes/ and adapters/protocol/), so the document and
 * the validation cannot drift apart. A test lists fastify's registered routes (onRoute) and fails
 * when one is missing here, and checks each route's real answers against `responses`.
 */

/** Who may call a route when the gateway has tokens: `open` always, `metrics` unless --metrics-auth, `token` otherwise. */
export type RouteAccess = 'open' | 'metrics' | 'token';

export interface RouteResponse {
  /** The body's schema; absent for bodies that are not JSON (`contentType` says what they are). */
  schema?: z.ZodType;
  contentType?: string;
  description: string;
}

export interface RouteDoc {
  method: 'GET' | 'POST' | 'DELETE';
  /** The fastify path (`:param`, `*`); the document spells it `{param}`. */
  path: string;
  tag: string;
  summary: string;
  access: RouteAccess;
  body?: z.ZodType;
  /** Another body type the route takes (a raw image, multipart upload), with its query fields. */
  altBody?: { contentTypes: readonly string[]; query?: z.ZodObject; description: string; /** A multipart form's text fields (its files are `file`). */ form?: z.ZodObject };
  query?: z.ZodObject;
  /** Success answers by status. */
  responses: Readonly<Record<number, RouteResponse>>;
  /** The error codes the route may answer besides those every route may (documented by status). */
  errors: readonly ErrorCode[];
}

const E = ErrorCode;
const ENGINE_ERRORS = [E.MODEL_NOT_FOUND, E.MODEL_LOADING, E.MODEL_LOAD_FAILED, E.MODEL_TOO_LARGE, E.UNSUPPORTED_OPERATION, E.INPUT_TOO_LARGE, E.OVERLOADED, E.TIMEOUT, E.UNAVAILABLE, E.INFERENCE_FAILED, E.DOWNLOAD_FAILED] as const;
const json = (schema: z.ZodType, description: string): RouteResponse => ({ schema, description });
const IMAGE_TYPES = ['image/png', 'image/jpeg', 'image/webp', 'application/octet-stream'] as const;

/** The TEI routes at `/<route>` and under both model prefixes, as tei-common.ts `teiPaths`. */
function teiRoutes(route: string, doc: Omit<RouteDoc, 'path' | 'tag' | 'access'>): RouteDoc[] {
  return [`/${route}`, `/models/:name/${route}`, `/models/:org/:name/${route}`].map((path, i) => ({
    ...doc,
    path,
    tag: 'TEI compatible',
    access: 'token',
    summary: i === 0 ? doc.summary : `${doc.summary} (model named in the path)`,
  }));
}

/** The per-index routes (routes/indexes.ts): the index named in the path, one of SHOAL_INDEXES. */
function indexRoutes(): RouteDoc[] {
  const STORE_ERRORS = [E.NOT_FOUND, E.UNAVAILABLE, E.TIMEOUT, E.CONFIG_INVALID] as const;
  const route = (method: RouteDoc['method'], path: string, summary: string, responses: RouteDoc['responses'], query?: z.ZodObject): RouteDoc => ({
    method, path, tag: 'Indexes', summary, access: 'token', responses, errors: [...STORE_ERRORS, E.INPUT_TOO_LARGE], ...(query === undefined ? {} : { query }),
  });
  return [
    route('GET', '/v1/indexes/:name/stats', "Rows, documents, model, spec, size and last ingest of an index's table", { 200: json(IndexStats, 'the statistics') }),
    route('GET', '/v1/indexes/:name/documents', 'Documents of the table, by source, one page at a time', { 200: json(IndexDocumentsPage, 'one page') }, DocumentsQuery),
    route('DELETE', '/v1/indexes/:name/documents', "Delete one document's chunks and state (?source=, %-encoded); NOT_FOUND when the table holds nothing of it", { 200: json(IndexDeleted, 'what was deleted') }, DeleteDocumentQuery),
    route('GET', '/v1/indexes/:name/tables', 'Tables of the store the index lives in, with their rows', { 200: json(IndexTables, 'by name') }),
  ];
}

export const ROUTE_TABLE: readonly RouteDoc[] = Object.freeze<RouteDoc[]>([
  { method: 'GET', path: '/healthz', tag: 'Probes', summary: 'Liveness: the process serves HTTP', access: 'open', responses: { 200: json(HealthResponse, 'alive') }, errors: [] },
  { method: 'GET', path: '/readyz', tag: 'Probes', summary: 'Readiness: backends connected, not shutting down', access: 'open', responses: { 200: json(ReadyResponse, 'ready') }, errors: [E.UNAVAILABLE] },
  {
    method: 'GET',
    path: '/metrics',
    tag: 'Probes',
    summary: 'Prometheus metrics (shoal_*)',
    access: 'metrics',
    responses: { 200: { contentType: 'text/plain', description: 'Prometheus text exposition format' } },
    errors: [],
  },
  {
    method: 'POST',
    path: '/v1/encode',
    tag: 'Primitives',
    summary: 'Embed texts or images (dense, sparse, multivector)',
    access: 'token',
    body: HttpEncodeRequest,
    altBody: { contentTypes: IMAGE_TYPES, query: EncodeQuery, description: 'one raw image; the other fields in the query string' },
    responses: { 200: json(HttpEncodeResult, 'the vectors; dense ones as base64 strings with encoding_format "base64"') },
    errors: ENGINE_ERRORS,
  },
  { method: 'POST', path: '/v1/score', tag: 'Primitives', summary: 'Score (rerank) items against a query', access: 'token', body: ScoreRequest, responses: { 200: json(ScoreResult, 'scores, best first') }, errors: ENGINE_ERRORS },
  {
    method: 'POST',
    path: '/v1/extract',
    tag: 'Primitives',
    summary: 'Entities, labels or OCR text of texts or images',
    access: 'token',
    body: ExtractRequest,
    altBody: { contentTypes: IMAGE_TYPES, query: ExtractQuery, description: 'one raw image; the other fields in the query string' },
    responses: { 200: json(ExtractResult, 'what was extracted, per item') },
    errors: ENGINE_ERRORS,
  },
  { method: 'POST', path: '/v1/tokenize', tag: 'Primitives', summary: 'Token ids of texts', access: 'token', body: TokenizeRequest, responses: { 200: json(TokenizeResult, 'tokens per item') }, errors: ENGINE_ERRORS },
  {
    method: 'POST',
    path: '/v1/jobs',
    tag: 'Jobs',
    summary: 'Submit an asynchronous job (needs NATS JetStream)',
    access: 'token',
    body: JobSubmission,
    responses: { 202: json(JobAccepted, 'accepted; Location: /v1/jobs/{id}') },
    errors: [E.JOB_CONFLICT, E.UNAVAILABLE, E.MODEL_NOT_FOUND, E.UNSUPPORTED_OPERATION, E.INPUT_TOO_LARGE, E.TIMEOUT],
  },
  {
    method: 'GET',
    path: '/v1/jobs',
    tag: 'Jobs',
    summary: 'The jobs, classification jobs and ingest runs this gateway accepted lately (the newest first, 200 kept)',
    access: 'token',
    query: JobListQuery,
    responses: { 200: json(JobListResponse, 'each as GET /v1/jobs/{id} answers it; one whose status expired is left out') },
    errors: [E.UNAVAILABLE, E.TIMEOUT],
  },
  {
    method: 'GET',
    path: '/v1/jobs/:id',
    tag: 'Jobs',
    summary: 'Status of a job, a classification job or an ingest run',
    access: 'token',
    responses: { 200: json(JobStatusResponse, 'its status') },
    errors: [E.NOT_FOUND, E.UNAVAILABLE, E.TIMEOUT],
  },
  {
    method: 'GET',
    path: '/v1/jobs/:id/results',
    tag: 'Jobs',
    summary: "A finished job's results as JSON Lines, in item order",
    access: 'token',
    responses: { 200: { contentType: 'application/x-ndjson', description: 'one JSON object per item; the job state in the Shoal-Job-State header' } },
    errors: [E.NOT_FOUND, E.UNAVAILABLE, E.UNSUPPORTED_OPERATION, E.TIMEOUT],
  },
  { method: 'GET', path: '/v1/models', tag: 'Models', summary: 'Served models (OpenAI list shape)', access: 'token', responses: { 200: json(ModelList, 'the models') }, errors: [] },
  { method: 'GET', path: '/v1/models/*', tag: 'Models', summary: 'One served model', access: 'token', responses: { 200: json(ModelEntry, 'the model') }, errors: [E.MODEL_NOT_FOUND, E.INVALID_INPUT] },
  { method: 'POST', path: '/v1/embeddings', tag: 'OpenAI compatible', summary: 'Embeddings, as OpenAI', access: 'token', body: EmbeddingsBody, responses: { 200: json(OpenAiEmbeddings, 'the embeddings') }, errors: ENGINE_ERRORS },
  ...teiRoutes('embed', { method: 'POST', summary: 'Dense embeddings, as TEI', body: TeiEmbedBody, responses: { 200: json(TeiEmbeddings, 'one vector per input') }, errors: ENGINE_ERRORS }),
  ...teiRoutes('rerank', { method: 'POST', summary: 'Rerank texts against a query, as TEI', body: TeiRerankBody, responses: { 200: json(TeiRerankHits, 'best first') }, errors: ENGINE_ERRORS }),
  ...teiRoutes('embed_sparse', { method: 'POST', summary: 'Sparse (SPLADE) embeddings, as TEI', body: TeiSparseBody, responses: { 200: json(TeiSparseEmbeddings, 'one sparse vector per input') }, errors: ENGINE_ERRORS }),
  ...teiRoutes('tokenize', { method: 'POST', summary: 'Tokens with offsets, as TEI', body: TeiTokenizeBody, responses: { 200: json(TeiTokens, 'tokens per input') }, errors: ENGINE_ERRORS }),
  ...teiRoutes('info', { method: 'GET', summary: 'Model information, as TEI', responses: { 200: json(TeiInfoResponse, 'the model served at this route') }, errors: ENGINE_ERRORS }),
  {
    method: 'POST',
    path: '/v1/search',
    tag: 'Documents',
    summary: 'Search a configured index',
    access: 'token',
    body: SearchBody,
    responses: { 200: json(SearchResponse, 'hits, best first') },
    errors: [E.NOT_FOUND, ...ENGINE_ERRORS],
  },
  {
    method: 'POST',
    path: '/v1/ingest',
    tag: 'Documents',
    summary: 'Ingest documents into a configured index (a job)',
    access: 'token',
    body: IngestBody,
    altBody: {
      contentTypes: ['multipart/form-data'],
      form: UploadFields,
      description: `an upload: one or more files (each up to ${MAX_DOCUMENT_BYTES} bytes, ${MAX_UPLOAD_FILES} at most) as \`file\` parts, the other fields as text (\`sources\` and a \`pipeline\` definition as JSON)`,
    },
    query: IngestQuery,
    responses: {
      200: json(IngestAccepted, 'with ?wait=true: the run finished within the wait'),
      202: json(IngestAccepted, 'accepted (or still running after ?wait=true); poll Location: /v1/jobs/{id}'),
    },
    errors: [E.NOT_FOUND, E.JOB_CONFLICT, E.UNAVAILABLE, E.MODEL_NOT_FOUND, E.UNSUPPORTED_OPERATION, E.TIMEOUT, E.UNSUPPORTED_MEDIA_TYPE, E.INPUT_TOO_LARGE],
  },
  { method: 'GET', path: '/v1/indexes', tag: 'Indexes', summary: 'The configured indexes: name, backend, table', access: 'token', responses: { 200: json(IndexList, 'by name') }, errors: [] },
  ...indexRoutes(),
  {
    method: 'POST',
    path: '/v1/classify',
    tag: 'Documents',
    summary: 'Classify items into a taxonomy (sync, or a job above the sync limits)',
    access: 'token',
    body: ClassifyHttpRequest,
    responses: { 200: json(ClassifyResponse, 'the classifications'), 202: json(ClassifyResponse, 'accepted as a job; Location: /v1/jobs/{id}') },
    errors: [E.JOB_CONFLICT, ...ENGINE_ERRORS],
  },
  { method: 'GET', path: '/openapi.json', tag: 'Reference', summary: 'This document (OpenAPI 3.1)', access: 'open', responses: { 200: { contentType: 'application/json', description: 'the OpenAPI document' } }, errors: [] },
  { method: 'GET', path: '/docs', tag: 'Reference', summary: 'Interactive API reference (Swagger UI)', access: 'open', responses: { 200: { contentType: 'text/html', description: 'the page' } }, errors: [] },
  {
    method: 'GET',
    path: '/docs/:asset',
    tag: 'Reference',
    summary: "Swagger UI's static files",
    access: 'open',
    responses: { 200: { contentType: 'application/octet-stream', description: 'the file' } },
    errors: [E.NOT_FOUND],
  },
  { method: 'GET', path: '/ui', tag: 'Reference', summary: 'The web console: search, runs and jobs, models, upload', access: 'open', responses: { 200: { contentType: 'text/html', description: 'the page (no data: it calls the API with the token it asks for)' } }, errors: [] },
  {
    method: 'GET',
    path: '/ui/:asset',
    tag: 'Reference',
    summary: "The web console's script modules and style sheet",
    access: 'open',
    responses: { 200: { contentType: 'application/octet-stream', description: 'the file' } },
    errors: [E.NOT_FOUND],
  },
]);
