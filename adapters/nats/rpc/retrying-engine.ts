import type { CallOptions, Engine } from '../../protocol/engine.js';
import { ERROR_TRAITS, toShoalError } from '../../protocol/errors.js';
import { pause } from '../../support/abortable.js';
import type { EncodeRequest, ExtractRequest, ScoreRequest, TokenizeRequest } from '../../protocol/requests.js';
import type { EncodeResult, ExtractResult, ScoreResult, TokenizeResult } from '../../protocol/results.js';

/**
 * Bulk work outlives a busy or restarting worker: a call that fails with a retryable code
 * (OVERLOADED while interactive traffic fills a worker, UNAVAILABLE while none answers) is tried
 * again with a doubling pause until `retryForMs` has passed since the first try. Request-reply
 * callers that must answer at once (an interactive HTTP call) do not use this: they answer 429.
 */

const FIRST_RETRY_MS = 250;
const MAX_RETRY_MS = 5_000;

/** Runs `call` until it succeeds, fails with a code that is not retryable, or `retryForMs` is spent. */
export async function whileRetryable<T>(call: () => Promise<T>, retryForMs: number, signal?: AbortSignal): Promise<T> {
  const until = Date.now() + retryForMs;
  for (let wait = FIRST_RETRY_MS; ; wait = Math.min(MAX_RETRY_MS, wait * 2)) {
    try {
      return await call();
    } catch (error) {
      const shoal = toShoalError(error);
      if (!ERROR_TRAITS[shoal.code].retryable || Date.now() + wait > until || signal?.aborted === true) throw shoal;
      await pause(wait, signal, 'cancelled while waiting to retry');
    }
  }
}

/** `engine` with every call retried while it fails with a retryable code; close() stays the caller's. */
export class RetryingEngine implements Engine {
  readonly #engine: Engine;
  readonly #retryForMs: number;

  constructor(engine: Engine, retryForMs: number) {
    this.#engine = engine;
    this.#retryForMs = retryForMs;
  }

  encode(request: EncodeRequest, options: CallOptions = {}): Promise<EncodeResult> {
    return whileRetryable(() => this.#engine.encode(request, options), this.#retryForMs, options.signal);
  }

  score(request: ScoreRequest, options: CallOptions = {}): Promise<ScoreResult> {
    return whileRetryable(() => this.#engine.score(request, options), this.#retryForMs, options.signal);
  }

  extract(request: ExtractRequest, options: CallOptions = {}): Promise<ExtractResult> {
    return whileRetryable(() => this.#engine.extract(request, options), this.#retryForMs, options.signal);
  }

  tokenize(request: TokenizeRequest, options: CallOptions = {}): Promise<TokenizeResult> {
    return whileRetryable(() => this.#engine.tokenize(request, options), this.#retryForMs, options.signal);
  }

  async close(): Promise<void> {
    // The wrapped engine is the caller's.
  }
}
