import type { FastifyReply } from 'fastify';
import { ErrorCode, ShoalError } from '../../adapters/protocol/errors.js';

/**
 * The life of one engine call made for an HTTP request: it is aborted when the client goes away
 * (queued work is dropped instead of computed for nobody) and when the gateway's request timeout
 * passes. A timeout answers at once with TIMEOUT, even if the engine is slow to notice the abort.
 */

export type CallRunner = <T>(work: (signal: AbortSignal) => Promise<T>) => Promise<T>;

export function callWithDeadline(reply: FastifyReply, timeoutMs: number): CallRunner {
  return async <T>(work: (signal: AbortSignal) => Promise<T>): Promise<T> => {
    const controller = new AbortController();
    // 'close' before the response finished = the client disconnected.
    const onClose = (): void => {
      if (!reply.raw.writableFinished) controller.abort();
    };
    reply.raw.once('close', onClose);
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<never>((_resolve, reject) => {
      timer = setTimeout(() => {
        // Rejected before the abort, so the race settles with TIMEOUT, not the engine's CANCELLED.
        reject(
          new ShoalError(ErrorCode.TIMEOUT, `the request took longer than the gateway's timeout of ${timeoutMs} ms`, {
            details: { timeoutMs },
          }),
        );
        controller.abort();
      }, timeoutMs);
    });
    try {
      // Started inside the try, and through an async function: a `work` that throws before it
      // returns a promise (the not-yet-connected backend's UNAVAILABLE) must still clear the timer,
      // whose rejection, with no one awaiting it, would otherwise end the process.
      const pending = (async () => work(controller.signal))();
      // The loser of the race settles later; its outcome is no longer anyone's concern.
      pending.catch(() => undefined);
      deadline.catch(() => undefined);
      return await Promise.race([pending, deadline]);
    } finally {
      clearTimeout(timer);
      reply.raw.off('close', onClose);
    }
  };
}
