import { ErrorCode, ShoalError } from '../protocol/errors.js';

/**
 * Resolves after `ms`, or rejects with CANCELLED (saying `what` was stopped) as soon as `signal`
 * aborts; its timer and listener are removed either way. For retry loops that must stop at once
 * on shutdown instead of sleeping out their backoff.
 */
export function pause(ms: number, signal: AbortSignal | undefined, what = 'cancelled'): Promise<void> {
  return new Promise((resolve, reject) => {
    const cancelled = (): void => {
      clearTimeout(timer);
      reject(new ShoalError(ErrorCode.CANCELLED, what));
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', cancelled);
      resolve();
    }, ms);
    if (signal?.aborted === true) cancelled();
    else signal?.addEventListener('abort', cancelled, { once: true });
  });
}
