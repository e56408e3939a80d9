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

/**
 * The settled value of `work`, or CANCELLED (saying `what`) as soon as `signal` aborts. The work
 * itself goes on (a NATS request cannot be withdrawn; a build other callers share must not be):
 * only this caller stops waiting for it.
 */
export function abortable<T>(work: Promise<T>, signal: AbortSignal | undefined, what = 'cancelled'): Promise<T> {
  if (signal === undefined) return work;
  if (signal.aborted) return Promise.reject(new ShoalError(ErrorCode.CANCELLED, what));
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(new ShoalError(ErrorCode.CANCELLED, what));
    signal.addEventListener('abort', onAbort, { once: true });
    work.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}
