import type { CallOptions, Engine } from '../../adapters/protocol/engine.js';
import { ErrorCode, ShoalError } from '../../adapters/protocol/errors.js';
import type { EncodeRequest, ExtractRequest, ScoreRequest, TokenizeRequest } from '../../adapters/protocol/requests.js';

/**
 * Admission control of the synchronous path. Every call holds its item count against a budget of
 * the model it names while it runs; a call that does not fit is refused at once with OVERLOADED
 * (429) instead of queueing behind work it would time out waiting for (504 after the deadline,
 * which is what callers saw before). Admitted calls therefore wait behind at most one budget's
 * worth of items, which bounds their latency. The Retry-After of a refusal is the time the
 * backlog in front of it takes at the throughput measured over the last seconds, so clients
 * spread their retries instead of all coming back after a constant second.
 */

export interface AdmissionSettings {
  /** Items in flight per model over all synchronous calls of this gateway. @default 2048 */
  maxInFlightItemsPerModel: number;
  /**
   * Longest expected wait of an admitted call: once the model's throughput is measured, a call is
   * refused when the items ahead of it (its own included) would take longer than this, so a slow
   * model admits fewer items than a fast one and admitted calls stay well inside the request-reply
   * timeout (10 s). @default 5
   */
  maxQueueSeconds?: number;
}

export const DEFAULT_ADMISSION: AdmissionSettings = Object.freeze({ maxInFlightItemsPerModel: 2048, maxQueueSeconds: 5 });

const MAX_RETRY_AFTER_S = 60;
/** Weight of the newest throughput sample in the moving average. */
const EWMA_WEIGHT = 0.3;

/**
 * One model's items in flight and its measured throughput: each completion is a sample of items
 * per second over the time since the previous completion (when the model was busy all along) or
 * over the call's own duration (the first after an idle spell), averaged exponentially.
 */
class ModelBudget {
  inFlight = 0;
  #itemsPerSecond: number | null = null;
  #lastCompletionAt: number | null = null;

  complete(items: number, startedAt: number, now: number): void {
    const since = this.#lastCompletionAt !== null && this.#lastCompletionAt > startedAt ? this.#lastCompletionAt : startedAt;
    const sample = items / Math.max(0.001, (now - since) / 1000);
    this.#itemsPerSecond = this.#itemsPerSecond === null ? sample : EWMA_WEIGHT * sample + (1 - EWMA_WEIGHT) * this.#itemsPerSecond;
    this.#lastCompletionAt = this.inFlight > 0 ? now : null;
  }

  /** Items per second recently finished; null before the first completion. */
  get throughput(): number | null {
    return this.#itemsPerSecond;
  }
}

export class Admission {
  readonly #settings: AdmissionSettings;
  readonly #models = new Map<string, ModelBudget>();

  constructor(settings: AdmissionSettings = DEFAULT_ADMISSION) {
    this.#settings = settings;
  }

  #budget(model: string): ModelBudget {
    let budget = this.#models.get(model);
    if (budget === undefined) {
      budget = new ModelBudget();
      this.#models.set(model, budget);
    }
    return budget;
  }

  /** Models with a budget entry (in flight now, or with a measured throughput). */
  get trackedModels(): number {
    return this.#models.size;
  }

  /** Items of `model` admitted and not finished yet. */
  inFlight(model: string): number {
    return this.#models.get(model)?.inFlight ?? 0;
  }

  /**
   * Runs `work` when `items` more fit in the model's budget (a call alone is always admitted, so
   * one request larger than the budget still runs); otherwise throws OVERLOADED at once.
   */
  async run<T>(model: string, items: number, work: () => Promise<T>): Promise<T> {
    const budget = this.#budget(model);
    const limit = this.#settings.maxInFlightItemsPerModel;
    const throughput = budget.throughput;
    const maxWait = this.#settings.maxQueueSeconds ?? DEFAULT_ADMISSION.maxQueueSeconds ?? 5;
    const tooSlow = throughput !== null && throughput > 0 && (budget.inFlight + items) / throughput > maxWait;
    if (budget.inFlight > 0 && (budget.inFlight + items > limit || tooSlow)) {
      // Unknown throughput (nothing finished yet): a second per budget's worth of backlog.
      const seconds = throughput === null || throughput <= 0 ? Math.ceil(budget.inFlight / limit) : budget.inFlight / throughput;
      const retryAfterSeconds = Math.min(MAX_RETRY_AFTER_S, Math.max(1, Math.ceil(seconds)));
      throw new ShoalError(
        ErrorCode.OVERLOADED,
        `model "${model}" has ${budget.inFlight} items in flight on this gateway (limit ${limit} items, or ${maxWait} s of work at ${throughput === null ? 'an unmeasured' : Math.round(throughput)} items/s); retry in ${retryAfterSeconds} s, or submit large work as a job (POST /v1/jobs)`,
        { details: { model, inFlightItems: budget.inFlight, limit, retryAfterSeconds } },
      );
    }
    budget.inFlight += items;
    const startedAt = Date.now();
    let ok = false;
    try {
      const result = await work();
      ok = true;
      return result;
    } finally {
      budget.inFlight -= items;
      // Only successful calls measure throughput: a fast failure (no worker) says nothing about it.
      if (ok) budget.complete(items, startedAt, Date.now());
      // Names that never succeeded (made-up models) leave nothing behind.
      if (budget.inFlight === 0 && budget.throughput === null) this.#models.delete(model);
    }
  }
}

/** The Engine every route uses, with admission in front of each call. */
export function admittedEngine(engine: Engine, admission: Admission): Engine {
  const items = (request: { items: readonly unknown[] }, extra = 0): number => request.items.length + extra;
  return {
    encode: (request: EncodeRequest, options?: CallOptions) => admission.run(request.model, items(request), () => engine.encode(request, options)),
    score: (request: ScoreRequest, options?: CallOptions) => admission.run(request.model, items(request, 1), () => engine.score(request, options)),
    extract: (request: ExtractRequest, options?: CallOptions) => admission.run(request.model, items(request), () => engine.extract(request, options)),
    tokenize: (request: TokenizeRequest, options?: CallOptions) => admission.run(request.model, items(request), () => engine.tokenize(request, options)),
    close: () => engine.close(),
  };
}
