import type { CallOptions, Engine } from '../../adapters/protocol/engine.js';
import { ErrorCode, ShoalError } from '../../adapters/protocol/errors.js';
import { JobSubmission, WIRE_VERSION, type JobsApi, type JobStatus, type SubmittedJob } from '../../adapters/protocol/jobs.js';
import type { EncodeResult, ExtractResult, ScoreResult, TokenizeResult } from '../../adapters/protocol/results.js';
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { ShoalMetrics } from '../../adapters/observability/metrics.js';
import { buildGatewayApp } from '../../services/gateway/app.js';
import type { GatewayDeps, GatewaySettings } from '../../services/gateway/context.js';

/**
 * Test doubles for the gateway where the backend is not the point: an in-memory JobsApi (the
 * route's contract, not JetStream's) and an Engine that fails or hangs on demand (error mapping,
 * deadlines). Real inference goes through the in-process InferenceEngine instead.
 */

export const TEST_SETTINGS: GatewaySettings = Object.freeze({
  apiTokens: [],
  protectMetrics: false,
  bodyLimitBytes: 64 * 1024,
  requestTimeoutMs: 30_000,
  corsOrigins: [],
  embedModel: 'tiny-bert-mean',
  rerankModel: 'tiny-cross-encoder',
  natsPrefix: 'shoal',
});

/** The gateway's error answer, every code one of ErrorCode's. */
export const ErrorBody = z.strictObject({
  error: z.strictObject({ code: z.enum(Object.values(ErrorCode) as [ErrorCode, ...ErrorCode[]]), message: z.string(), details: z.record(z.string(), z.unknown()).optional() }),
});

/** The HTTP app over `engine` (usually the in-process one), in-memory jobs and one listed model; not listening (use `inject`). */
export function localGateway(engine: Engine, settings: Partial<GatewaySettings> = {}, overrides: Partial<GatewayDeps> = {}): FastifyInstance {
  return buildGatewayApp(
    {
      engine,
      jobs: new MemoryJobs(),
      models: async () => [{ id: 'tiny-bert-mean' }],
      metrics: new ShoalMetrics({ processMetrics: false }),
      ready: async () => ({ ready: true }),
      ...overrides,
    },
    { ...TEST_SETTINGS, ...settings },
  );
}

/** Jobs kept in a map; each submission is queued with one part per `part_items` items. */
export class MemoryJobs implements JobsApi {
  readonly statuses = new Map<string, JobStatus>();
  readonly submissions: JobSubmission[] = [];
  #next = 1;

  async submit(input: JobSubmission): Promise<SubmittedJob> {
    const submission = JobSubmission.parse(input);
    this.submissions.push(input);
    const jobId = submission.job_id ?? `job-${this.#next++}`;
    const raw = submission.request.items;
    const items = Array.isArray(raw) ? raw.length : 0;
    const parts = Math.max(1, Math.ceil(items / (submission.part_items ?? 1000)));
    const now = new Date(0).toISOString();
    const model = typeof submission.request.model === 'string' ? submission.request.model : '';
    const status: JobStatus = {
      v: WIRE_VERSION,
      job_id: jobId,
      state: 'queued',
      primitive: submission.primitive,
      model,
      parts,
      parts_done: 0,
      parts_failed: 0,
      items,
      errors: [],
      result: submission.result,
      created_at: now,
      updated_at: now,
    };
    this.statuses.set(jobId, status);
    return { job_id: jobId, parts, items, status };
  }

  async status(jobId: string): Promise<JobStatus | null> {
    return this.statuses.get(jobId) ?? null;
  }

  /** Every model is served here: the routes' own checks are what these tests look at. */
  async checkModel(): Promise<void> {}
}

/** An Engine whose every call runs `behaviour` (throw a code, or wait for the abort signal). */
export class ScriptedEngine implements Engine {
  readonly signals: AbortSignal[] = [];
  readonly #behaviour: (options: CallOptions) => Promise<never>;

  constructor(behaviour: (options: CallOptions) => Promise<never>) {
    this.#behaviour = behaviour;
  }

  static failing(code: ErrorCode, details?: Record<string, unknown>): ScriptedEngine {
    return new ScriptedEngine(async () => {
      throw new ShoalError(code, `scripted ${code}`, details === undefined ? {} : { details });
    });
  }

  /** Never answers; rejects with CANCELLED once the call's signal aborts. */
  static hanging(): ScriptedEngine {
    return new ScriptedEngine(
      (options) =>
        new Promise<never>((_resolve, reject) => {
          options.signal?.addEventListener('abort', () => reject(new ShoalError(ErrorCode.CANCELLED, 'aborted')), { once: true });
        }),
    );
  }

  #run(options: CallOptions = {}): Promise<never> {
    if (options.signal !== undefined) this.signals.push(options.signal);
    return this.#behaviour(options);
  }

  encode(_request: unknown, options?: CallOptions): Promise<EncodeResult> {
    return this.#run(options);
  }

  score(_request: unknown, options?: CallOptions): Promise<ScoreResult> {
    return this.#run(options);
  }

  extract(_request: unknown, options?: CallOptions): Promise<ExtractResult> {
    return this.#run(options);
  }

  tokenize(_request: unknown, options?: CallOptions): Promise<TokenizeResult> {
    return this.#run(options);
  }

  async close(): Promise<void> {}
}
