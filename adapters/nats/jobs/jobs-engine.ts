import { createHash, randomBytes } from 'node:crypto';
import type { CallOptions, Engine } from '../../protocol/engine.js';
import { ErrorCode, ShoalError } from '../../protocol/errors.js';
import type { JobSubmission } from '../../protocol/jobs.js';
import type { EncodeRequest, ExtractRequest, ScoreRequest, TokenizeRequest } from '../../protocol/requests.js';
import type { EncodeResult, ExtractResult, ScoredItem, ScoreResult, TokenizeResult } from '../../protocol/results.js';
import type { JobsClient, ResolvedPartResult } from './jobs-client.js';
import { withNatsRetry } from '../connection/nats-retry.js';
import { whileRetryable } from '../rpc/retrying-engine.js';

/**
 * An Engine for bulk work over NATS: bulk `encode` and `extract` calls become JetStream jobs on
 * the model's subject (split into parts the workers batch across, results gathered back in item
 * order), while `tokenize`, `score` and interactive calls go to `rpc` (request-reply). Without
 * `rpc` (`shoal classify --nats`: a client that talks to JetStream only) every encode and score
 * call is a job, score parts merged into one ranking. Job ids are `<prefix>-<n>`, numbered per
 * engine, so a caller that restarts with the same prefix resubmits the same jobs (the jobs client
 * answers an existing job instead of running it twice).
 */

export interface JobsEngineOptions {
  /** Prefix of the job ids (an ingest run's id). @default a random one */
  jobPrefix?: string;
  /** Items per job part. @default the jobs client's */
  partItems?: number;
  /** Longest wait for one job. @default 24 hours */
  timeoutMs?: number;
  /**
   * How long a request-reply call keeps being retried while it fails with a retryable code (no
   * worker answers: one restarting after a crash). @default 120000
   */
  retryForMs?: number;
  /** Told whenever a job this engine waits on reports progress (its status changed: a part done). */
  onProgress?: () => void;
}

const DEFAULT_RETRY_FOR_MS = 120_000;
/** Leaves room for `-e<n>` in a 64-character job id. */
const MAX_PREFIX_CHARS = 48;

type ItemsResult = EncodeResult | ExtractResult;

export class JobsEngine implements Engine {
  readonly #rpc: Engine | null;
  readonly #jobs: JobsClient;
  readonly #options: JobsEngineOptions;
  readonly #prefix: string;
  #next = 0;

  /** `rpc` (null: jobs only) and `jobs` stay the caller's: close() closes neither. */
  constructor(rpc: Engine | null, jobs: JobsClient, options: JobsEngineOptions = {}) {
    this.#rpc = rpc;
    this.#jobs = jobs;
    this.#options = options;
    const prefix = options.jobPrefix ?? `j${randomBytes(8).toString('hex')}`;
    // Job ids are at most 64 characters: a long prefix is replaced by a digest of itself (still stable).
    this.#prefix = prefix.length <= MAX_PREFIX_CHARS ? prefix : createHash('sha256').update(prefix).digest('hex').slice(0, MAX_PREFIX_CHARS);
  }

  /** Submits one job, waits for it and reads its parts back; each step outlives a brief NATS outage. */
  async #run(primitive: 'encode' | 'extract' | 'score', request: EncodeRequest | ExtractRequest | ScoreRequest, options: CallOptions): Promise<{ jobId: string; parts: ResolvedPartResult[] }> {
    const jobId = `${this.#prefix}-${primitive[0]}${this.#next++}`;
    const submission: JobSubmission = { job_id: jobId, primitive, request: { ...request }, result: { kind: 'stream' } };
    if (this.#options.partItems !== undefined) submission.part_items = this.#options.partItems;
    // Submitting (idempotent for one job id and content), waiting and reading results back each
    // outlive a brief NATS outage (a broker restart): retried for a bounded time, not failed.
    const retry = { ...(options.signal === undefined ? {} : { signal: options.signal }) };
    await withNatsRetry(`submit ${primitive} job ${jobId}`, () => this.#jobs.submit(submission), retry);
    const status = await withNatsRetry(`wait for ${primitive} job ${jobId}`, () => this.#jobs.wait(jobId, { timeoutMs: this.#options.timeoutMs ?? 24 * 3_600_000, ...(options.signal === undefined ? {} : { signal: options.signal }), ...(this.#options.onProgress === undefined ? {} : { onStatus: this.#options.onProgress }) }), retry);
    if (status.state !== 'completed') {
      const first = status.errors[0];
      const code = first?.code ?? ErrorCode.INFERENCE_FAILED;
      throw new ShoalError(code, `${primitive} job ${jobId} on ${request.model} ended ${status.state}: ${first?.message ?? 'no error recorded'}`);
    }
    const parts = await withNatsRetry(`read the results of ${primitive} job ${jobId}`, async () => {
      const read: ResolvedPartResult[] = [];
      for await (const part of this.#jobs.results(jobId)) read.push(part);
      return read;
    }, retry);
    return { jobId, parts };
  }

  async #job<R extends ItemsResult>(primitive: 'encode' | 'extract', request: EncodeRequest | ExtractRequest, options: CallOptions): Promise<R> {
    const { jobId, parts } = await this.#run(primitive, request, options);
    const items: R['items'][number][] = [];
    let model = request.model;
    const usage = { tokens: 0 };
    for (const part of parts) {
      const result = part.result;
      if (result === undefined || !('items' in result)) throw new ShoalError(ErrorCode.INTERNAL, `part ${part.part} of job ${jobId} has no items`);
      model = result.model;
      usage.tokens += result.usage.tokens;
      items.push(...(result.items as R['items'][number][]));
    }
    items.sort((a, b) => a.index - b.index);
    const expected = request.items.length;
    if (items.length !== expected) throw new ShoalError(ErrorCode.INTERNAL, `job ${jobId} returned ${items.length} of ${expected} items`);
    return { model, items, usage } as R;
  }

  /** Score parts are ranked separately: merged into one ranking (ties keep request order, as one request would). */
  async #scoreJob(request: ScoreRequest, options: CallOptions): Promise<ScoreResult> {
    const { jobId, parts } = await this.#run('score', request, options);
    const scores: ScoredItem[] = [];
    let tokens = 0;
    for (const part of parts) {
      const result = part.result;
      if (result === undefined || !('scores' in result)) throw new ShoalError(ErrorCode.INTERNAL, `part ${part.part} of job ${jobId} has no scores`);
      scores.push(...result.scores);
      tokens += result.usage.tokens;
    }
    scores.sort((a, b) => b.score - a.score || a.index - b.index);
    return { model: request.model, scores, usage: { items: scores.length, tokens } };
  }

  encode(request: EncodeRequest, options: CallOptions = {}): Promise<EncodeResult> {
    if (request.priority === 'interactive' && this.#rpc !== null) return this.#rpc.encode(request, options);
    return this.#job<EncodeResult>('encode', request, options);
  }

  extract(request: ExtractRequest, options: CallOptions = {}): Promise<ExtractResult> {
    if (request.priority === 'interactive' && this.#rpc !== null) return this.#rpc.extract(request, options);
    return this.#job<ExtractResult>('extract', request, options);
  }

  // A bulk run outlives a worker restart: retryable failures are retried with a growing pause.
  score(request: ScoreRequest, options: CallOptions = {}): Promise<ScoreResult> {
    const rpc = this.#rpc;
    if (rpc === null) return this.#scoreJob(request, options);
    return whileRetryable(() => rpc.score(request, options), this.#options.retryForMs ?? DEFAULT_RETRY_FOR_MS, options.signal);
  }

  tokenize(request: TokenizeRequest, options: CallOptions = {}): Promise<TokenizeResult> {
    const rpc = this.#rpc;
    if (rpc === null) return Promise.reject(new ShoalError(ErrorCode.UNSUPPORTED_OPERATION, 'this engine runs jobs only (encode, extract and score); tokenize needs request-reply'));
    return whileRetryable(() => rpc.tokenize(request, options), this.#options.retryForMs ?? DEFAULT_RETRY_FOR_MS, options.signal);
  }

  async close(): Promise<void> {
    // Nothing of its own to release.
  }
}
