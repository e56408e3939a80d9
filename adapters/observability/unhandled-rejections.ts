import type { Logger } from './logger.js';

/**
 * Keeps a long-running service (gateway, worker, results sink) up through a promise rejection
 * nobody handled. Node's default ends the process on one, so a single forgotten `.catch` on a
 * rare path (a timer rejecting after its request was answered) took every in-flight request and
 * every connection down with it. The rejection is a bug to fix, not a reason to stop serving: it
 * is logged in full (message and stack, for the operator; never sent to a client) and the process
 * keeps running. Uncaught exceptions are left to Node: the state they leave behind is unknown.
 */

/** Installs the handler; returns a function that removes it (tests, a service embedded in-process). */
export function logUnhandledRejections(logger: Logger): () => void {
  const onRejection = (reason: unknown): void => {
    const err = reason instanceof Error ? { message: reason.message, stack: reason.stack, code: codeOf(reason) } : { message: String(reason) };
    logger.error({ err }, 'unhandled promise rejection (a bug): logged and ignored, the service keeps running');
  };
  process.on('unhandledRejection', onRejection);
  return () => {
    process.off('unhandledRejection', onRejection);
  };
}

function codeOf(error: Error): string | undefined {
  return 'code' in error && typeof error.code === 'string' ? error.code : undefined;
}
