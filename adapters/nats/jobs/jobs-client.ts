import { randomUUID } from 'node:crypto';
import { withNatsRetry } from '../connection/nats-retry.js';
import { jetstream, type JetStreamClient } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import type { S3SettingsInput, S3Store } from '../../object-store/index.js';
import { ErrorCode, ShoalError } from '../../protocol/errors.js';
import {
  JobPartResult,
  JobSubmission,
  PrimitiveResult,
  REQUEST_SCHEMAS,
  WIRE_VERSION,
  type JobPart,
  type JobsApi,
  type JobStatus,
  type SubmittedJob,
} from '../../protocol/jobs.js';
import { checkJobId } from '../../protocol/subjects.js';
import { parseWith } from '../../protocol/validate.js';
import { toNatsShoalError } from '../connection/nats-errors.js';
import { PayloadStore, getJson } from '../connection/payloads.js';
import { checkFileTarget } from './file-targets.js';
import { checkSameJob, jobContentHash } from './job-identity.js';
import type { ModelGate } from './model-gate.js';
import { readPartResult } from '../results/result-reader.js';
import { jsonSafe } from '../rpc/rpc-wire.js';
import { StatusStore, TERMINAL_STATES, initialStatus } from './status-store.js';
import { ensureJobConsumer, ensureTopology, type ConsumerSettingsInput, type Topology, type TopologySettingsInput } from '../connection/topology.js';

/**
 * JobsApi over JetStream, for the gateway and `shoal submit`: validates a submission, splits its
 * items into parts (one message each, by reference when over the message limit), creates the
 * job's status, makes sure the model's consumer exists (KEDA scales on it, even with no worker
 * running) and publishes the parts with `Nats-Msg-Id` = `<job>.<part>`, so resubmitting a job
 * with the same id inside the dedupe window adds nothing. Also waits for jobs and reads results.
 */

/** Items per part when the submission does not say: results of 384-dim embeddings stay well under 1 MB. */
export const DEFAULT_PART_ITEMS = 64;
/** Room left for headers and the subject under the server's max_payload. */
const MESSAGE_HEADROOM = 4096;
const DEFAULT_PUBLISH_WINDOW = 256;
const RESULT_READ_WINDOW = 32;
/** How often wait() checks whether the job it waits on is overdue. */
const OVERDUE_CHECK_MS = 1_000;
/** A job not finished a day after submission ends `failed`/`partial` (TIMEOUT). */
export const DEFAULT_JOB_TIMEOUT_MS = 24 * 3_600_000;
/** A submission still publishing parts after this long was abandoned (its submitter died). */
export const DEFAULT_SUBMIT_TIMEOUT_MS = 10 * 60_000;

export interface JobsClientOptions {
  topology?: TopologySettingsInput;
  /** Settings of consumers this client creates when a model has none yet (an existing one is left as the workers set it). */
  consumer?: ConsumerSettingsInput;
  /** @default 64 */
  partItems?: number;
  /** Largest message body; default: the server's max_payload. Parts over it travel by reference. */
  maxMessageBytes?: number;
  /** Part publishes awaiting their ack at once. @default 256 */
  publishWindow?: number;
  /** Folders results written to `file://` targets may be read back from. @default [] */
  fileRoots?: readonly string[];
  /** S3 settings for `s3://` result targets (checked at submit) and stored results read back. @default the SDK's defaults */
  s3?: S3SettingsInput;
  /** An S3 store to use instead of `s3` (shared with the gateway's ingest runs, so one allow-list decides both; not closed here). */
  s3Store?: S3Store;
  /**
   * Refuse at submit a `file://` result target outside `fileRoots` (or any, when there are none):
   * the gateway, whose file roots are the workers'. @default false
   */
  checkFileTargets?: boolean;
  /**
   * Index names an `{kind: "index"}` result target may name (SHOAL_INDEXES: what the results sink
   * can open); any other name, or any index target when none are given, is refused at submit.
   * @default []
   */
  indexNames?: readonly string[];
  /** How long a job may take before it ends `failed`/`partial` with TIMEOUT. @default 24 hours */
  jobTimeoutMs?: number;
  /** How long a submission may take to publish its parts before the job counts as abandoned. @default 10 minutes */
  submitTimeoutMs?: number;
  /**
   * Builds the check that refuses a model before anything is stored (throws MODEL_NOT_FOUND,
   * INVALID_INPUT...): servedModelGate (model-gate.ts) lets through only models some worker
   * serves or served, so made-up names create no status, consumer or part. @default none
   */
  modelGate?: (topology: Topology) => ModelGate;
}

export interface WaitOptions {
  /** Fail with TIMEOUT after this long. */
  timeoutMs?: number;
  signal?: AbortSignal;
  /** Told each status seen while waiting (a part finished, a state changed): progress, for a caller watching for stalls. */
  onStatus?: (status: JobStatus) => void;
}

/** A part's result with `result` filled in (read from the store when the message held a reference). */
export type ResolvedPartResult = JobPartResult;

/** An index target must name a configured index, for a job whose results are vectors. */
function checkIndexTarget(primitive: JobPart['primitive'], index: string, known: readonly string[]): void {
  if (primitive !== 'encode') {
    throw new ShoalError(ErrorCode.INVALID_INPUT, `an index result target takes encode jobs (vectors), not ${primitive}`, { details: { field: 'result.kind' } });
  }
  if (!known.includes(index)) {
    const configured = known.length === 0 ? 'none configured: set SHOAL_INDEXES=name=URI here and on the results sink' : `configured: ${known.join(', ')}`;
    throw new ShoalError(ErrorCode.INVALID_INPUT, `result target: no index named ${JSON.stringify(index)} (${configured})`, { details: { field: 'result.index' } });
  }
}

function utf8(text: string): Uint8Array {
  return Buffer.from(text, 'utf8');
}

export class JobsClient implements JobsApi {
  readonly topology: Topology;
  readonly #js: JetStreamClient;
  readonly #status: StatusStore;
  readonly #payloads: PayloadStore;
  readonly #options: JobsClientOptions;
  readonly #maxBytes: number;
  readonly #consumers = new Map<string, Promise<string>>();
  readonly #modelGate: ModelGate | null;

  private constructor(nc: NatsConnection, topology: Topology, status: StatusStore, options: JobsClientOptions) {
    this.topology = topology;
    this.#modelGate = options.modelGate?.(topology) ?? null;
    this.#js = jetstream(nc);
    this.#status = status;
    this.#payloads = new PayloadStore(nc, {
      bucket: topology.names.payloadBucket,
      fileRoots: options.fileRoots ?? [],
      ...(options.s3Store !== undefined ? { s3Store: options.s3Store } : options.s3 === undefined ? {} : { s3: options.s3 }),
    });
    this.#options = options;
    this.#maxBytes = (options.maxMessageBytes ?? nc.info?.max_payload ?? 1024 * 1024) - MESSAGE_HEADROOM;
  }

  /** Sets up the topology (idempotent) and opens the status bucket. The connection stays the caller's. */
  static async open(nc: NatsConnection, options: JobsClientOptions = {}): Promise<JobsClient> {
    // A replicated stream's leader may be electing: its calls time out for a while (bounded retry).
    const topology = await withNatsRetry('set up the NATS topology', () => ensureTopology(nc, options.topology ?? {}));
    const status = await withNatsRetry('open the job status bucket', () => StatusStore.open(nc, topology.names.statusBucket));
    return new JobsClient(nc, topology, status, options);
  }

  #ensureConsumer(primitive: JobPart['primitive'], model: string): Promise<string> {
    const key = `${primitive} ${model}`;
    let ensured = this.#consumers.get(key);
    if (ensured === undefined) {
      ensured = ensureJobConsumer(this.topology, primitive, model, this.#options.consumer ?? {}, true);
      ensured.catch(() => this.#consumers.delete(key));
      this.#consumers.set(key, ensured);
    }
    return ensured;
  }

  async checkModel(primitive: JobPart['primitive'], model: string): Promise<void> {
    await this.#modelGate?.(primitive, model);
  }

  async submit(input: JobSubmission): Promise<SubmittedJob> {
    const submission = parseWith(JobSubmission, input, 'job submission');
    const jobId = checkJobId(submission.job_id ?? randomUUID());
    const request = parseWith(REQUEST_SCHEMAS[submission.primitive], submission.request, `${submission.primitive} request`);
    const { items, ...shared } = request;
    const model = request.model;
    if (this.#options.checkFileTargets === true && submission.result.kind === 'store') checkFileTarget(submission.result.uri, this.#options.fileRoots ?? []);
    await this.checkModel(submission.primitive, model);
    // A target the workers could not write (a malformed or disallowed s3:// URI, an obj:// bucket
    // that does not exist) is refused now, not part by part.
    if (submission.result.kind === 'store') await this.#payloads.checkTarget(submission.result.uri);
    if (submission.result.kind === 'index') checkIndexTarget(submission.primitive, submission.result.index, this.#options.indexNames ?? []);
    const size = submission.part_items ?? this.#options.partItems ?? DEFAULT_PART_ITEMS;
    const parts = Math.ceil(items.length / size);
    const now = new Date();
    const submittedAt = now.toISOString();
    const envelope = { v: WIRE_VERSION, job_id: jobId, parts, primitive: submission.primitive, model, result: submission.result } as const;
    const contentHash = jobContentHash({ primitive: submission.primitive, request, result: submission.result, partItems: size });
    const deadlineAt = new Date(now.getTime() + (this.#options.jobTimeoutMs ?? DEFAULT_JOB_TIMEOUT_MS));

    const created = await this.#status.create(initialStatus(envelope, items.length, now, { contentHash, deadlineAt }));
    // A resubmission: the same content is the same job (publishing again adds nothing, and
    // finishes a submission whose submitter died); other content under this id is refused.
    checkSameJob(created, { primitive: submission.primitive, model, parts, items: items.length, contentHash });
    if (TERMINAL_STATES.has(created.state)) return { job_id: jobId, parts, items: items.length, status: created };
    await this.#ensureConsumer(submission.primitive, model);
    const subject = this.topology.names.jobs(submission.primitive, model);
    const window = this.#options.publishWindow ?? DEFAULT_PUBLISH_WINDOW;
    const inFlight = new Set<Promise<void>>();
    for (let part = 0; part < parts; part++) {
      const offset = part * size;
      const partRequest = jsonSafe({ ...shared, items: items.slice(offset, offset + size) });
      const publish = this.#publishPart(subject, { ...envelope, part, offset, submitted_at: submittedAt }, partRequest);
      const tracked: Promise<void> = publish.finally(() => inFlight.delete(tracked));
      inFlight.add(tracked);
      if (inFlight.size >= window) await Promise.race(inFlight);
    }
    await Promise.all(inFlight);
    const status = await this.#status.markSubmitted(created);
    return { job_id: jobId, parts, items: items.length, status };
  }

  async #publishPart(subject: string, part: Omit<JobPart, 'request' | 'payload_ref'>, request: unknown): Promise<void> {
    let body = utf8(JSON.stringify({ ...part, request }));
    if (body.byteLength > this.#maxBytes) {
      const ref = await this.#payloads.put(`jobs/${part.job_id}/${part.part}.json`, utf8(JSON.stringify(request)));
      body = utf8(JSON.stringify({ ...part, payload_ref: ref }));
    }
    try {
      await this.#js.publish(subject, body, { msgID: `${part.job_id}.${part.part}`, expect: { streamName: this.topology.names.jobsStream } });
    } catch (error) {
      throw toNatsShoalError(error, `publish part ${part.part} of job ${part.job_id}`);
    }
  }

  /** The job's status; a job past its deadline, or abandoned mid-submit, is ended (visibly) by this read. */
  status(jobId: string): Promise<JobStatus | null> {
    return this.#status.expireIfOverdue(checkJobId(jobId), this.#submitTimeoutMs);
  }

  get #submitTimeoutMs(): number {
    return this.#options.submitTimeoutMs ?? DEFAULT_SUBMIT_TIMEOUT_MS;
  }

  /** Status changes of a job as they happen, starting with the current status; ends when `signal` aborts. */
  watch(jobId: string, signal?: AbortSignal): AsyncGenerator<JobStatus> {
    return this.#status.watch(checkJobId(jobId), signal);
  }

  /** Resolves with the status once the job is completed, failed or partial. */
  async wait(jobId: string, options: WaitOptions = {}): Promise<JobStatus> {
    checkJobId(jobId);
    const signals = [options.signal, options.timeoutMs === undefined ? undefined : AbortSignal.timeout(options.timeoutMs)].filter(
      (s): s is AbortSignal => s !== undefined,
    );
    const signal = signals.length === 0 ? undefined : AbortSignal.any(signals);
    let last: JobStatus | null = null;
    // A job nobody works on never changes: check the deadline while waiting, so it ends visibly.
    const overdue = setInterval(() => void this.#status.expireIfOverdue(jobId, this.#submitTimeoutMs).catch(() => undefined), OVERDUE_CHECK_MS);
    try {
      for await (const status of this.#status.watch(jobId, signal)) {
        last = status;
        options.onStatus?.(status);
        if (TERMINAL_STATES.has(status.state)) return status;
        if (status.deadline_at !== undefined && Date.parse(status.deadline_at) <= Date.now()) void this.#status.expireIfOverdue(jobId, this.#submitTimeoutMs).catch(() => undefined);
      }
    } finally {
      clearInterval(overdue);
    }
    if (options.signal?.aborted === true) throw new ShoalError(ErrorCode.CANCELLED, `stopped waiting for job ${jobId}`);
    const progress = last === null ? 'no status yet' : `${last.parts_done + last.parts_failed} of ${last.parts} parts finished`;
    throw new ShoalError(ErrorCode.TIMEOUT, `job ${jobId} did not finish within ${options.timeoutMs ?? 0} ms (${progress})`);
  }

  /**
   * Messages on results subjects that were not a part's result (forged, or for another job or
   * part, or late for a finished job): dropped, never served (result-reader.ts).
   */
  droppedResults = 0;

  /** The result of one part (result-reader.ts says which message that is), or null when it has none yet. */
  async partResult(jobId: string, part: number, resolve = true, known?: JobStatus): Promise<ResolvedPartResult | null> {
    const status = known ?? (await this.status(jobId));
    if (status === null) return null;
    const { jsm, names } = this.topology;
    const result = await readPartResult({ jsm, names, status, onDropped: () => (this.droppedResults += 1) }, part);
    if (result === null) return null;
    if (!resolve || result.result !== undefined || result.result_ref === undefined) return result;
    const body = await getJson(this.#payloads, result.result_ref);
    return { ...result, result: parseWith(PrimitiveResult, body, `stored result ${result.result_ref}`, ErrorCode.INTERNAL) };
  }

  /** Every part's result in part order (parts without a result yet are skipped). */
  async *results(jobId: string, options: { resolve?: boolean } = {}): AsyncGenerator<ResolvedPartResult> {
    const status = await this.status(jobId);
    if (status === null) throw new ShoalError(ErrorCode.INVALID_INPUT, `job ${jobId} does not exist (or its status expired)`);
    for (let start = 0; start < status.parts; start += RESULT_READ_WINDOW) {
      const indexes = Array.from({ length: Math.min(RESULT_READ_WINDOW, status.parts - start) }, (_, i) => start + i);
      const batch = await Promise.all(indexes.map((part) => this.partResult(jobId, part, options.resolve ?? true, status)));
      for (const result of batch) if (result !== null) yield result;
    }
  }
}
