import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { ShoalMetrics } from '../../adapters/observability/metrics.js';
import type { ErrorCode } from '../../adapters/protocol/errors.js';
import type { Priority } from '../../adapters/protocol/requests.js';

/**
 * Per-request metrics of the gateway: `shoal_requests_total{primitive, model, code}` and
 * `shoal_request_seconds{primitive, lane}`, recorded when the response is sent. A route marks its
 * request with `track()` once it knows the primitive and model; untracked requests (probes,
 * /metrics) are not counted. The model label is bounded: any client can send any model name, so
 * only names that have succeeded once become labels (at most `maxModels`); the rest count as
 * `other`, keeping the number of series finite whatever callers send. A route whose success does
 * not check the name (a classification job is accepted before its model is loaded) tracks it with
 * `admit: false`: the name is used only if it is a label already.
 */

/**
 * Values of the `primitive` label: the engine's primitives (`model`: the model), `job` (job and
 * ingest submission, POST /v1/jobs and /v1/ingest; `model`: the job's model, or `other`),
 * `job_read` (GET /v1/jobs/:id and /v1/jobs/:id/results; `model`: the job's model, or `other`),
 * `search` (POST /v1/search; `model`: the configured index name, `other` until it resolves), `index`
 * (the /v1/indexes routes; `model`: the configured index name, `other` for the list and until it resolves) and
 * `classify` (POST /v1/classify, sync or job; `model`: the request's embedding model).
 */
export type TrackedPrimitive = 'encode' | 'score' | 'extract' | 'tokenize' | 'job' | 'job_read' | 'search' | 'index' | 'classify';

interface Tracked {
  primitive: TrackedPrimitive;
  model: string;
  lane: Priority;
  admit: boolean;
  code: ErrorCode | null;
}

export const OTHER_MODEL = 'other';
const DEFAULT_MAX_MODELS = 200;

export class RequestMetrics {
  readonly #metrics: ShoalMetrics;
  readonly #tracked = new WeakMap<FastifyRequest, Tracked>();
  readonly #models = new Set<string>();
  readonly #maxModels: number;

  constructor(metrics: ShoalMetrics, maxModels: number = DEFAULT_MAX_MODELS) {
    this.#metrics = metrics;
    this.#maxModels = maxModels;
  }

  /** Hooks the recorder into the app: every tracked request is counted once, when it completes. */
  register(app: FastifyInstance): void {
    app.addHook('onResponse', async (request, reply) => {
      const tracked = this.#tracked.get(request);
      if (tracked === undefined) return;
      const ok = reply.statusCode < 400;
      const code = ok ? 'OK' : (tracked.code ?? `HTTP_${reply.statusCode}`);
      this.#metrics.requests.inc({ primitive: tracked.primitive, model: this.#modelLabel(tracked.model, ok && tracked.admit), code });
      this.#metrics.requestSeconds.observe({ primitive: tracked.primitive, lane: tracked.lane }, reply.elapsedTime / 1000);
    });
  }

  /**
   * Marks (or re-marks) the request as counted under these labels. `admit` (default true): whether
   * a success may make `model` a new label; false where nothing has checked that the model exists.
   */
  track(request: FastifyRequest, labels: { primitive: TrackedPrimitive; model: string; lane?: Priority | undefined; admit?: boolean | undefined }): void {
    this.#tracked.set(request, { primitive: labels.primitive, model: labels.model, lane: labels.lane ?? 'interactive', admit: labels.admit ?? true, code: null });
  }

  /** Called by the error handler so the counter carries the error code, not just the status. */
  failed(request: FastifyRequest, code: ErrorCode): void {
    const tracked = this.#tracked.get(request);
    if (tracked !== undefined) tracked.code = code;
  }

  #modelLabel(model: string, admit: boolean): string {
    if (this.#models.has(model)) return model;
    if (admit && this.#models.size < this.#maxModels) {
      this.#models.add(model);
      return model;
    }
    return OTHER_MODEL;
  }
}
