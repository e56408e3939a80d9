import { ERROR_TRAITS, ErrorCode, ShoalError } from '../protocol/errors.js';
import { pause } from '../support/abortable.js';
import { toS3Error } from './errors.js';

/**
 * Shoal's own bounded retry around one whole S3 operation, beyond the SDK's attempts per request:
 * while the store answers with retryable failures (UNAVAILABLE: down, throttling, 5xx) the
 * operation is tried again with exponential backoff and "equal jitter" (half the delay fixed, half
 * random, so a fleet of workers does not hammer a restarting server in step) until `budgetMs` has
 * passed since the first try. Non-retryable failures (NOT_FOUND, CONFIG_INVALID...) end at once.
 */

export interface RetryOptions {
  /** Retrying stops once this long has passed since the first try. */
  budgetMs: number;
  /** First delay. @default 250 */
  baseDelayMs?: number;
  /** Longest delay. @default 5000 */
  maxDelayMs?: number;
  signal?: AbortSignal | undefined;
  /** Called before each retry (logs, metrics): the store is degraded while this fires. */
  onRetry?: ((event: RetryEvent) => void) | undefined;
  /** Called when the operation succeeds (a degraded store answers again). */
  onSuccess?: ((what: string) => void) | undefined;
}

export interface RetryEvent {
  /** The operation and its URI (`write s3://bucket/key`). */
  what: string;
  /** Retries of this operation so far (0 before the first retry). */
  attempt: number;
  delayMs: number;
  error: ShoalError;
}


/** The delay before retry number `attempt` (0-based): base·2^attempt capped, half of it random. */
export function backoffDelay(attempt: number, baseMs: number, maxMs: number, random: () => number = Math.random): number {
  const cap = Math.min(maxMs, baseMs * 2 ** Math.min(attempt, 30));
  return cap / 2 + random() * (cap / 2);
}

export async function withRetry<T>(what: string, operation: () => Promise<T>, options: RetryOptions): Promise<T> {
  const started = Date.now();
  const base = options.baseDelayMs ?? 250;
  const max = options.maxDelayMs ?? 5_000;
  for (let attempt = 0; ; attempt++) {
    let value: T;
    try {
      value = await operation();
    } catch (error) {
      const shoal = toS3Error(error, what);
      if (options.signal?.aborted === true) throw new ShoalError(ErrorCode.CANCELLED, `${what}: cancelled`, { cause: error });
      if (!ERROR_TRAITS[shoal.code].retryable) throw shoal;
      const delay = backoffDelay(attempt, base, max);
      const elapsed = Date.now() - started;
      if (elapsed + delay > options.budgetMs) {
        if (attempt === 0) throw shoal;
        throw new ShoalError(shoal.code, `${shoal.message} (gave up after ${attempt + 1} tries in ${Math.round(elapsed / 1000)} s)`, { cause: error });
      }
      options.onRetry?.({ what, attempt, delayMs: Math.round(delay), error: shoal });
      await pause(delay, options.signal);
      continue;
    }
    options.onSuccess?.(what);
    return value;
  }
}
