import type { Logger } from '../../adapters/observability/logger.js';
import type { ShoalMetrics } from '../../adapters/observability/metrics.js';
import type { Readable } from 'node:stream';
import type { ClassifyRunStatus, ParsedClassifyRequest } from '../../adapters/protocol/classify.js';
import type { Engine } from '../../adapters/protocol/engine.js';
import type { IngestRunStatus } from '../../adapters/protocol/ingest.js';
import type { DocumentMetadata } from '../../adapters/protocol/metadata.js';
import type { JobsApi } from '../../adapters/protocol/jobs.js';
import type { PipelineDefinition } from '../../pipelines/documents/definition.js';
import type { NatsNames } from '../../adapters/protocol/subjects.js';
import type { AdmissionSettings } from './admission.js';
import type { CallRunner, callWithDeadline } from './call-context.js';
import type { RequestMetrics } from './request-metrics.js';
import type { IndexPool } from './index-pool.js';
import type { IndexStoreOptions } from './index-stores.js';
import type { ClassifyRuns } from './classify-runs.js';
import type { ModelFactsCache } from './model-facts.js';
import type { IndexOutages } from './index-outages.js';

/**
 * The types every part of the gateway shares: what the app is built from (deps, settings) and
 * what each route file receives. Kept apart from app.ts so route files never import the app
 * that registers them (no import circle).
 */

/** One entry of GET /v1/models: the id clients put in `model`, plus what is known about it. */
export interface ModelCard {
  id: string;
  /** Model family (dense, cross-encoder, splade...), when known. */
  family?: string;
  /** Primitives the model answers. */
  primitives?: readonly string[];
  /** Loaded on some worker right now. */
  resident?: boolean;
}

export interface ReadyReport {
  ready: boolean;
  /** Why not, for the 503 body. */
  reason?: string;
}

export interface GatewayDeps {
  engine: Engine;
  /** Asynchronous jobs; null when the gateway runs without JetStream (POST /v1/jobs answers UNAVAILABLE). */
  jobs: JobsApi | null;
  models(): Promise<readonly ModelCard[]>;
  metrics: ShoalMetrics;
  /** Whether requests can be served now (backends connected, workers present). */
  ready(): Promise<ReadyReport>;
  /** Ingest runs (POST /v1/ingest, and their status under GET /v1/jobs/:id); absent: POST /v1/ingest answers UNAVAILABLE. */
  ingest?: IngestApi | null;
  /**
   * Classification jobs run by the classify workers: their status and results under
   * /v1/jobs/:id on every replica; POST /v1/classify publishes them when `classifyJobs` is set.
   * Absent: only this gateway's own classification jobs are known.
   */
  classifyJobs?: ClassifyJobsApi | null;
  logger?: Logger;
}

export interface GatewaySettings {
  /** Bearer tokens; empty = no authentication. */
  apiTokens: readonly string[];
  /** Require a token on /metrics as well. */
  protectMetrics: boolean;
  /** Largest request body. */
  bodyLimitBytes: number;
  /** Longest time one synchronous call may take before it answers TIMEOUT. */
  requestTimeoutMs: number;
  /** Browser origins allowed cross-origin; empty = CORS off. */
  corsOrigins: readonly string[];
  /** Model of TEI's /embed (TEI requests name no model). */
  embedModel: string | null;
  /** Model of TEI's /rerank. */
  rerankModel: string | null;
  /**
   * Model of TEI's /embed_sparse (a SPLADE model): --sparse-model / SHOAL_SPARSE_MODEL.
   * @default null: the embed model, as a TEI server started with a SPLADE model serves it on /embed_sparse
   */
  sparseModel?: string | null;
  /** NATS subject prefix, to tell clients where job results are published. */
  natsPrefix: string;
  /** Admission control of synchronous calls (admission.ts). @default DEFAULT_ADMISSION */
  admission?: AdmissionSettings;
  /** Indexes served by /v1/search and /v1/ingest: name → sink target (SHOAL_INDEXES). @default none */
  indexes?: Readonly<Record<string, string>>;
  /** Credentials and S3 client settings the indexes are opened with (never logged). @default none */
  indexOptions?: IndexStoreOptions;
  /**
   * POST /v1/ingest publishes document jobs (SHOAL_DOCUMENT_JOBS): the run is the workers', any
   * replica answers its status, and a gateway restart loses nothing. @default false: this gateway coordinates
   */
  documentJobs?: boolean;
  /**
   * A POST /v1/classify job is published as classification jobs for `shoal worker --classify`
   * (SHOAL_CLASSIFY_JOBS): any replica answers its status and results, and a gateway restart
   * loses nothing. @default false: the job runs in this gateway (classify-runs.ts)
   */
  classifyJobs?: boolean;
  /** The folder of pipeline files the documents workers share (SHOAL_PIPELINES), for checking names. @default none */
  pipelinesDir?: string | null;
  /** POST /v1/classify: the sync limit and where jobs write their results. @default 256 items sync, results in the OS temp folder, no category cache */
  classify?: ClassifySettings;
}

export interface ClassifySettings {
  /** Products answered synchronously; more (or `mode: "job"`) become a job. @default 256 */
  syncItems: number;
  /** Folder of job results (a per-process folder beneath it). @default null: `<os tmpdir>/shoal-classify-jobs` */
  resultsDir: string | null;
  /** Category cache of jobs (`classify/` beneath it). @default null: none, categories embedded per job */
  cacheDir: string | null;
}

/** A source of an ingest request: an inline text record or a document by reference. */
export type IngestRecord = ({ id: string; text: string } | { id?: string | undefined; ref: string }) & { metadata?: DocumentMetadata | undefined };

export interface IngestStart {
  job_id?: string | undefined;
  definition: PipelineDefinition;
  /** The configured index name and its sink target. */
  index: { name: string; target: string };
  records: readonly IngestRecord[];
  force: boolean;
  /** After the run, delete the documents of its `file://` folders that are no longer there (`shoal ingest --prune`). @default false */
  prune?: boolean;
}

/** A run of document jobs (SHOAL_DOCUMENT_JOBS): names only, the workers resolve them. */
export interface IngestJobsStart {
  job_id?: string | undefined;
  pipeline: string;
  index: string;
  records: readonly IngestRecord[];
}

/** Ingest runs in the background (over NATS), their status read back by id. */
export interface IngestApi {
  start(request: IngestStart): Promise<IngestRunStatus>;
  /** Publishes the run as document jobs; absent: this gateway cannot (answers UNAVAILABLE). */
  startJobs?(request: IngestJobsStart): Promise<IngestRunStatus>;
  status(jobId: string): Promise<IngestRunStatus | null>;
  /**
   * Stores an uploaded file (multipart POST /v1/ingest) where the run can read it, under `name`,
   * and returns its reference (`obj://<p>_payloads/<name>`); absent: uploads answer UNAVAILABLE.
   */
  stage?(name: string, path: string): Promise<string>;
}

/** Classification jobs of the classify workers (classify-jobs.ts), by id from any replica. */
export interface ClassifyJobsApi {
  /** Publishes the run (or answers the run this id already names with the same content); JOB_CONFLICT for other content. */
  submit(request: ParsedClassifyRequest, jobId: string | undefined, result: string | undefined): Promise<ClassifyRunStatus>;
  status(jobId: string): Promise<ClassifyRunStatus | null>;
  /** A finished run's results (JSON Lines, catalog order) from its target; UNAVAILABLE while it runs; null: no such run. */
  results(jobId: string): Promise<{ status: ClassifyRunStatus; stream: Readable } | null>;
}

/** What every route file receives. */
export interface RouteContext {
  deps: GatewayDeps;
  settings: GatewaySettings;
  names: NatsNames;
  metrics: RequestMetrics;
  /** Runs one engine call for this reply: aborted on client disconnect, TIMEOUT after the deadline. */
  call(reply: Parameters<typeof callWithDeadline>[0]): CallRunner;
  /** Classification jobs (POST /v1/classify above the sync limit), read back under /v1/jobs/:id. */
  classifyRuns: ClassifyRuns;
  /** Maximum input length and special-token template per model, learned once each (TEI's /info and /tokenize). */
  modelFacts: ModelFactsCache;
  /** Served indexes whose store is known to be down: searches of them answer 503 at once (index-outages.ts). */
  indexOutages: IndexOutages;
  /** The served indexes, parsed at start, each store kept open across requests (index-pool.ts). */
  indexPool: IndexPool;
  /** True once shutdown began (readiness turns false so load balancers stop sending). */
  closing(): boolean;
}
