import type { JobsClient } from '../../../../adapters/nats/jobs-client.js';
import type { CallOptions, Engine } from '../../../../adapters/protocol/engine.js';
import { ErrorCode, ShoalError } from '../../../../adapters/protocol/errors.js';
import type { JobSubmission } from '../../../../adapters/protocol/jobs.js';
import type { EncodeRequest, ScoreRequest } from '../../../../adapters/protocol/requests.js';
import { EncodeResult, ScoreResult, type EncodedItem, type ScoredItem } from '../../../../adapters/protocol/results.js';
import { parseWith } from '../../../../adapters/protocol/validate.js';

/**
 * The Engine of `shoal classify --nats`: each encode or score call becomes one JetStream job
 * (split into parts that the workers pull), awaited and reassembled in item order; retrieval,
 * fusion and the hierarchy vote stay on the client. Workers batch parts of many jobs together,
 * so keeping a few calls in flight keeps them busy.
 */

export interface JobsEngineOptions {
  /** Items per job part. @default the jobs client's (64) */
  partItems?: number;
  /** Longest wait for one job. @default 1 hour */
  timeoutMs?: number;
}

const DEFAULT_TIMEOUT_MS = 3_600_000;

export class JobsEngine implements Engine {
  readonly #jobs: JobsClient;
  readonly #options: JobsEngineOptions;

  constructor(jobs: JobsClient, options: JobsEngineOptions = {}) {
    this.#jobs = jobs;
    this.#options = options;
  }

  async #run(submission: JobSubmission, call: CallOptions): Promise<unknown[]> {
    const submitted = await this.#jobs.submit({ ...submission, ...(this.#options.partItems === undefined ? {} : { part_items: this.#options.partItems }) });
    const status = await this.#jobs.wait(submitted.job_id, { timeoutMs: this.#options.timeoutMs ?? DEFAULT_TIMEOUT_MS, ...(call.signal === undefined ? {} : { signal: call.signal }) });
    if (status.state !== 'completed') {
      const first = status.errors[0];
      throw new ShoalError(first?.code ?? ErrorCode.INTERNAL, `job ${status.job_id} ended ${status.state}${first === undefined ? '' : `: ${first.message}`}`);
    }
    const results: unknown[] = [];
    for await (const part of this.#jobs.results(submitted.job_id)) {
      if (part.status !== 'ok' || part.result === undefined) throw new ShoalError(part.error?.code ?? ErrorCode.INTERNAL, `part ${part.part} of job ${part.job_id} has no result`);
      results.push(part.result);
    }
    return results;
  }

  async encode(request: EncodeRequest, options: CallOptions = {}): Promise<EncodeResult> {
    const parts = await this.#run({ primitive: 'encode', request: { ...request } }, options);
    const items: EncodedItem[] = [];
    let tokens = 0;
    for (const part of parts) {
      const result = parseWith(EncodeResult, part, 'encode job result', ErrorCode.INTERNAL);
      items.push(...result.items);
      tokens += result.usage.tokens;
    }
    items.sort((a, b) => a.index - b.index);
    return { model: request.model, items, usage: { items: items.length, tokens } };
  }

  async score(request: ScoreRequest, options: CallOptions = {}): Promise<ScoreResult> {
    const parts = await this.#run({ primitive: 'score', request: { ...request } }, options);
    const scores: ScoredItem[] = [];
    let tokens = 0;
    for (const part of parts) {
      const result = parseWith(ScoreResult, part, 'score job result', ErrorCode.INTERNAL);
      scores.push(...result.scores);
      tokens += result.usage.tokens;
    }
    // Parts are ranked separately: merge them (ties keep request order, as one request would).
    scores.sort((a, b) => b.score - a.score || a.index - b.index);
    return { model: request.model, scores, usage: { items: scores.length, tokens } };
  }

  extract(): Promise<never> {
    return Promise.reject(new ShoalError(ErrorCode.UNSUPPORTED_OPERATION, 'shoal classify --nats runs encode and score jobs only'));
  }

  tokenize(): Promise<never> {
    return Promise.reject(new ShoalError(ErrorCode.UNSUPPORTED_OPERATION, 'shoal classify --nats runs encode and score jobs only'));
  }

  /** The connection and jobs client stay the caller's. */
  async close(): Promise<void> {}
}
