/**
 * `shoal/protocol`: the wire schemas (zod) and error codes every surface shares — the HTTP
 * API, NATS request-reply and jobs, the in-process engine — for clients that validate what they
 * send and receive.
 */

export * from '../../adapters/protocol/errors.js';
export * from '../../adapters/protocol/requests.js';
export * from '../../adapters/protocol/results.js';
export * from '../../adapters/protocol/jobs.js';
export type { Engine, CallOptions } from '../../adapters/protocol/engine.js';
