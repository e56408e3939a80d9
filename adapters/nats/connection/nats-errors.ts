import { errors as natsErrors } from '@nats-io/transport-node';
import { JetStreamApiCodes, JetStreamApiError } from '@nats-io/jetstream';
import { ErrorCode, ShoalError, isShoalError } from '../../protocol/errors.js';

/**
 * NATS client errors → ShoalError, so callers (gateway, CLI, worker) compare codes, never NATS
 * classes or messages. `what` says what was being done ("publish job part", "request encode").
 */

/** JetStream API codes this package reacts to (the client's own table lacks "stream name in use" and the placement answers). */
export const JS_CODES = Object.freeze({
  ...JetStreamApiCodes,
  StreamNameInUse: 10058,
  /** "no suitable peers for placement": too few servers for the replicas (or, with "insufficient storage", no room). */
  NoPeers: 10005,
  /** "replicas > 1 not supported in non-clustered mode". */
  ReplicasNotSupported: 10074,
  /** "subjects overlap with an existing stream". */
  StreamSubjectsOverlap: 10065,
});

/**
 * What a stream create answers when another service created the same stream a moment before:
 * "stream name already in use", or (nats-server 2.9, two creates in flight at once) "subjects
 * overlap with an existing stream". Either way the stream now exists; the caller reads it back.
 */
export function isConcurrentCreate(error: unknown): boolean {
  return isJsApiCode(error, JS_CODES.StreamNameInUse) || isJsApiCode(error, JS_CODES.StreamSubjectsOverlap);
}

export function jsApiCode(error: unknown): number | null {
  return error instanceof JetStreamApiError ? error.code : null;
}

export function isJsApiCode(error: unknown, code: number): boolean {
  return jsApiCode(error) === code;
}

export function isNoResponders(error: unknown): boolean {
  if (error instanceof natsErrors.NoRespondersError) return true;
  return error instanceof natsErrors.RequestError && error.isNoResponders();
}

export function isTimeout(error: unknown): boolean {
  if (error instanceof natsErrors.TimeoutError) return true;
  return error instanceof natsErrors.RequestError && error.cause instanceof natsErrors.TimeoutError;
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

export function toNatsShoalError(error: unknown, what: string): ShoalError {
  if (isShoalError(error)) return error;
  const reason = describe(error);
  if (isNoResponders(error)) return new ShoalError(ErrorCode.UNAVAILABLE, `${what}: no responders`, { cause: error });
  if (isTimeout(error)) return new ShoalError(ErrorCode.TIMEOUT, `${what}: timed out`, { cause: error });
  if (error instanceof natsErrors.AuthorizationError || error instanceof natsErrors.UserAuthenticationExpiredError) {
    return new ShoalError(ErrorCode.UNAUTHORIZED, `${what}: NATS refused the credentials (${reason})`, { cause: error });
  }
  if (error instanceof natsErrors.PermissionViolationError) {
    return new ShoalError(ErrorCode.UNAUTHORIZED, `${what}: NATS permissions do not allow ${error.operation} on ${error.subject}`, { cause: error });
  }
  if (
    error instanceof natsErrors.ClosedConnectionError ||
    error instanceof natsErrors.DrainingConnectionError ||
    error instanceof natsErrors.ConnectionError
  ) {
    return new ShoalError(ErrorCode.UNAVAILABLE, `${what}: the NATS connection is not usable (${reason})`, { cause: error });
  }
  // The JetStream API had no responders: a server without JetStream, or one that restarted and has
  // not brought JetStream back yet (seconds): worth retrying within a bound. The client does not
  // export the class (JetStreamNotEnabled), only its name.
  if (error instanceof Error && error.name === 'JetStreamNotEnabled') {
    return new ShoalError(ErrorCode.UNAVAILABLE, `${what}: JetStream is not available on the server (not enabled, or still starting after a restart)`, { cause: error });
  }
  if (error instanceof JetStreamApiError) {
    return new ShoalError(ErrorCode.UNAVAILABLE, `${what}: JetStream answered ${error.code}: ${reason}`, { cause: error, details: { jsCode: error.code } });
  }
  return new ShoalError(ErrorCode.INTERNAL, `${what}: ${reason}`, { cause: error });
}
