import { ErrorCode, ShoalError } from '../../protocol/errors.js';
import { pause } from '../../support/abortable.js';
import { toNatsShoalError } from './nats-errors.js';

/**
 * A bounded retry around one NATS operation of an ingest coordinator, as S3 operations have
 * (object-store/retry.ts): a broker restarting, a connection being re-established or a call timed
 * out while the server was away fails with TIMEOUT or UNAVAILABLE, and the operation is tried again
 * with a doubling pause until `budgetMs` has passed since the first try. Other failures (the object
 * is missing, the value is not ours) end at once. Only idempotent operations are wrapped: a KV put
 * of a whole value, a publish with a message id, a read.
 */

/** How long a coordinator keeps retrying one NATS operation through an outage. @default 60000 */
export const DEFAULT_NATS_RETRY_MS = 60_000;
const FIRST_DELAY_MS = 100;
const MAX_DELAY_MS = 2_000;

const TRANSIENT: ReadonlySet<string> = new Set([ErrorCode.TIMEOUT, ErrorCode.UNAVAILABLE]);

export interface NatsRetryOptions {
  /** @default DEFAULT_NATS_RETRY_MS */
  budgetMs?: number;
  signal?: AbortSignal | undefined;
  /** Called before each retry (a run marks itself degraded, logs). */
  onRetry?: (error: ShoalError, attempt: number) => void;
}

export async function withNatsRetry<T>(what: string, operation: () => Promise<T>, options: NatsRetryOptions = {}): Promise<T> {
  const until = Date.now() + (options.budgetMs ?? DEFAULT_NATS_RETRY_MS);
  for (let attempt = 0, delay = FIRST_DELAY_MS; ; attempt++, delay = Math.min(MAX_DELAY_MS, delay * 2)) {
    try {
      return await operation();
    } catch (error) {
      const shoal = toNatsShoalError(error, what);
      if (!TRANSIENT.has(shoal.code) || options.signal?.aborted === true) throw shoal;
      if (Date.now() + delay > until) {
        throw new ShoalError(shoal.code, `${shoal.message} (gave up after ${attempt + 1} tries)`, { cause: error });
      }
      options.onRetry?.(shoal, attempt);
      await pause(delay, options.signal, `${what}: cancelled`);
    }
  }
}
