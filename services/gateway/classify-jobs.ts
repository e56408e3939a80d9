import { createHash, randomUUID } from 'node:crypto';
import { Readable } from 'node:stream';
import type { NatsConnection } from '@nats-io/transport-node';
import { checkFileTarget } from '../../adapters/nats/jobs/file-targets.js';
import { S3Store, type S3SettingsInput } from '../../adapters/object-store/index.js';
import type { ClassifyRunStatus, ParsedClassifyRequest } from '../../adapters/protocol/classify.js';
import { publicClassifyStatus } from '../../adapters/protocol/classify-jobs.js';
import { ErrorCode, ShoalError, toShoalError } from '../../adapters/protocol/errors.js';
import { checkJobId } from '../../adapters/protocol/subjects.js';
import { ClassifyProducer } from '../../pipelines/classify/classify-producer.js';
import { requestTaxonomy } from '../../pipelines/classify/index.js';
import type { ClassifyJobsApi } from './context.js';

/**
 * POST /v1/classify jobs as classification jobs (SHOAL_CLASSIFY_JOBS): the gateway is a
 * producer, not the place a run lives. It checks the request (the taxonomy is parsed, a result
 * target checked), stores the spec, records the run and publishes the products as chunks for
 * `shoal worker --classify` (pipelines/classify/classify-producer.ts), then keeps nothing of it:
 * any replica answers GET /v1/jobs/:id from the run's status in KV and streams its results from
 * the target, and a gateway closed right after the 202 loses nothing. A job id names one
 * request's content: resubmitted with the same content it answers the same run (and publishes
 * again what a gateway stopped mid-publish may have left out; repeats are deduplicated), with
 * other content it is 409 JOB_CONFLICT.
 */

export interface ClassifyJobRunsOptions {
  /** The gateway's NATS connection (throws UNAVAILABLE while it is not connected). */
  connection: () => NatsConnection;
  prefix: string;
  /** Replicas of what the producer creates (SHOAL_STREAM_REPLICAS). @default the topology's (1) */
  replicas?: number;
  /** Folders `file://` result targets may name (the gateway refuses others at submit, and reads results there). @default [] */
  fileRoots?: readonly string[];
  /** The gateway's S3 settings or store (SHOAL_S3_BUCKETS decides a target's bucket). */
  s3: S3SettingsInput | S3Store;
}

function contentHash(request: ParsedClassifyRequest, result: string | undefined): string {
  return createHash('sha256').update(JSON.stringify({ request, result: result ?? null })).digest('hex');
}

export class ClassifyJobRuns implements ClassifyJobsApi {
  readonly #options: ClassifyJobRunsOptions;
  #producer: Promise<ClassifyProducer> | null = null;

  constructor(options: ClassifyJobRunsOptions) {
    this.#options = options;
  }

  #open(): Promise<ClassifyProducer> {
    if (this.#producer === null) {
      const { s3 } = this.#options;
      const topology = { prefix: this.#options.prefix, ...(this.#options.replicas === undefined ? {} : { replicas: this.#options.replicas }) };
      const opening = ClassifyProducer.open(this.#options.connection(), topology, { fileRoots: this.#options.fileRoots ?? [], ...(s3 instanceof S3Store ? { s3Store: s3 } : { s3 }) });
      opening.catch(() => (this.#producer = null));
      this.#producer = opening;
    }
    return this.#producer;
  }

  async submit(request: ParsedClassifyRequest, jobId: string | undefined, result: string | undefined): Promise<ClassifyRunStatus> {
    const producer = await this.#open();
    const runId = checkJobId(jobId ?? randomUUID());
    const hash = contentHash(request, result);
    const stored = await producer.status(runId);
    if (stored !== null && stored.content_hash !== hash) {
      throw new ShoalError(ErrorCode.JOB_CONFLICT, `job ${runId} exists with a different request; choose another job_id or resubmit the same request`, { details: { job_id: runId, kind: 'classify', state: stored.state } });
    }
    // A run whose end was counted was published whole: the same content answers it as it is.
    if (stored !== null && (stored.chunks !== null || stored.state === 'failed')) return publicClassifyStatus(stored);
    // The taxonomy is read now, so a bad one is refused (422) rather than failing the run after the 202.
    requestTaxonomy(request);
    if (result !== undefined) {
      checkFileTarget(result, this.#options.fileRoots ?? []);
      await producer.checkTarget(result);
    }
    const { items, ...method } = request;
    await producer.publish({ runId, request: method, items, knownItems: items.length, contentHash: hash, ...(result === undefined ? {} : { result }) });
    const status = await producer.status(runId);
    if (status === null) throw new ShoalError(ErrorCode.INTERNAL, `the status of classification run ${runId} vanished right after it was written`);
    return publicClassifyStatus(status);
  }

  async status(jobId: string): Promise<ClassifyRunStatus | null> {
    const record = await (await this.#open()).status(jobId);
    return record === null ? null : publicClassifyStatus(record);
  }

  async results(jobId: string): Promise<{ status: ClassifyRunStatus; stream: Readable } | null> {
    const producer = await this.#open();
    const record = await producer.status(jobId);
    if (record === null) return null;
    const status = publicClassifyStatus(record);
    // A failed run has no results: its chunks are never assembled (its status says why).
    if (record.state === 'failed') return { status, stream: Readable.from([]) };
    if (record.state !== 'completed') {
      throw new ShoalError(ErrorCode.UNAVAILABLE, `job ${jobId} is ${status.state} (${status.items_done} of ${status.items} products classified): read its results once GET /v1/jobs/${jobId} says completed or failed`, {
        details: { job_id: jobId, state: status.state },
      });
    }
    try {
      return { status, stream: await producer.results(record) };
    } catch (error) {
      const shoal = toShoalError(error);
      if (shoal.code !== ErrorCode.INVALID_INPUT) throw shoal;
      // A target this gateway may not read (a file:// folder outside its roots) or one gone since.
      throw new ShoalError(ErrorCode.UNSUPPORTED_OPERATION, `the results of job ${jobId} are at ${record.result}, which this gateway cannot read: ${shoal.message}`, { cause: error, details: { job_id: jobId, result: record.result } });
    }
  }

  async close(): Promise<void> {
    const producer = this.#producer;
    this.#producer = null;
    (await producer?.catch(() => null))?.close();
  }
}
