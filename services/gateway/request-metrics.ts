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
 * `other`, keeping the number of series finite whatever callers send.
 */

/** Values of the `primitive` label: the engine's primitives, and job submission. */
export type TrackedPrimitive = 'encode' | 'score' | 'extract' | 'tokenize' | 'job';

interface Tracked {
  primitive: TrackedPrimitive;
  model: string;
  lane: Priority;
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
      this.#metrics.requests.inc({ primitive: tracked.primitive, model: this.#modelLabel(tracked.model, ok), code });
      this.#metrics.requestSeconds.observe({ primitive: tracked.primitive, lane: tracked.lane }, reply.elapsedTime / 1000);
    });
  }

  track(request: FastifyRequest, labels: { primitive: TrackedPrimitive; model: string; lane?: Priority | undefined }): void {
    this.#tracked.set(request, { primitive: labels.primitive, model: labels.model, lane: labels.lane ?? 'interactive', code: null });
  }

  /** Called by the error handler so the counter carries the error code, not just the status. */
  failed(request: FastifyRequest, code: ErrorCode): void {
    const tracked = this.#tracked.get(request);
    if (tracked !== undefined) tracked.code = code;
  }

  #modelLabel(model: string, ok: boolean): string {
    if (this.#models.has(model)) return model;
    if (ok && this.#models.size < this.#maxModels) {
      this.#models.add(model);
      return model;
    }
    return OTHER_MODEL;
  }
}
