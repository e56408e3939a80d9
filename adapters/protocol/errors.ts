/**
 * Shoal's single error vocabulary. Every failure that crosses a boundary (thread, HTTP, NATS, CLI)
 * is a ShoalError carrying one of these codes; callers compare codes, never messages.
 */

export const ErrorCode = {
  INVALID_INPUT: 'INVALID_INPUT',
  INPUT_TOO_LARGE: 'INPUT_TOO_LARGE',
  /** A request body of a type the route does not take (HTTP: not JSON, or compressed). */
  UNSUPPORTED_MEDIA_TYPE: 'UNSUPPORTED_MEDIA_TYPE',
  /** An HTTP route that exists, called with another method. */
  METHOD_NOT_ALLOWED: 'METHOD_NOT_ALLOWED',
  UNAUTHORIZED: 'UNAUTHORIZED',
  MODEL_NOT_FOUND: 'MODEL_NOT_FOUND',
  /** A job, route or other named resource (not a model) does not exist. */
  NOT_FOUND: 'NOT_FOUND',
  /** A job id already names a job with different content (a resubmission must be identical). */
  JOB_CONFLICT: 'JOB_CONFLICT',
  MODEL_LOAD_FAILED: 'MODEL_LOAD_FAILED',
  MODEL_LOADING: 'MODEL_LOADING',
  MODEL_TOO_LARGE: 'MODEL_TOO_LARGE',
  UNSUPPORTED_OPERATION: 'UNSUPPORTED_OPERATION',
  DOWNLOAD_FAILED: 'DOWNLOAD_FAILED',
  INFERENCE_FAILED: 'INFERENCE_FAILED',
  OVERLOADED: 'OVERLOADED',
  TIMEOUT: 'TIMEOUT',
  CANCELLED: 'CANCELLED',
  UNAVAILABLE: 'UNAVAILABLE',
  CONFIG_INVALID: 'CONFIG_INVALID',
  INTERNAL: 'INTERNAL',
  /** Some items of a batch run failed (each with its own code) while the others succeeded. */
  PARTIAL_FAILURE: 'PARTIAL_FAILURE',
  /** A document whose content is of no kind Shoal reads (a binary that is not a PDF or image). */
  UNSUPPORTED_DOCUMENT: 'UNSUPPORTED_DOCUMENT',
  /** A password-protected document. */
  DOCUMENT_ENCRYPTED: 'DOCUMENT_ENCRYPTED',
  /** A damaged or truncated document. */
  DOCUMENT_CORRUPT: 'DOCUMENT_CORRUPT',
  /** A document with no bytes, no pages or no text. */
  DOCUMENT_EMPTY: 'DOCUMENT_EMPTY',
  /** A document over the byte or page limit. */
  DOCUMENT_TOO_LARGE: 'DOCUMENT_TOO_LARGE',
} as const;

export type ErrorCode = (typeof ErrorCode)[keyof typeof ErrorCode];

/** What a queue consumer does with a message that failed with this code. */
export type DeliveryAction = 'term' | 'nak' | 'ack';

export interface ErrorTraits {
  /** HTTP status the gateway answers with. */
  readonly httpStatus: number;
  /** Whether the same request can succeed later without being changed. */
  readonly retryable: boolean;
  /** Queue handling: term = never redeliver, nak = redeliver later. */
  readonly delivery: DeliveryAction;
}

/** The one table mapping each code to its HTTP status, retry semantics and queue handling. */
export const ERROR_TRAITS: Readonly<Record<ErrorCode, ErrorTraits>> = Object.freeze({
  INVALID_INPUT: { httpStatus: 422, retryable: false, delivery: 'term' },
  INPUT_TOO_LARGE: { httpStatus: 413, retryable: false, delivery: 'term' },
  UNSUPPORTED_MEDIA_TYPE: { httpStatus: 415, retryable: false, delivery: 'term' },
  METHOD_NOT_ALLOWED: { httpStatus: 405, retryable: false, delivery: 'term' },
  UNAUTHORIZED: { httpStatus: 401, retryable: false, delivery: 'term' },
  MODEL_NOT_FOUND: { httpStatus: 404, retryable: false, delivery: 'term' },
  NOT_FOUND: { httpStatus: 404, retryable: false, delivery: 'term' },
  JOB_CONFLICT: { httpStatus: 409, retryable: false, delivery: 'term' },
  MODEL_LOAD_FAILED: { httpStatus: 424, retryable: true, delivery: 'nak' },
  MODEL_LOADING: { httpStatus: 503, retryable: true, delivery: 'nak' },
  MODEL_TOO_LARGE: { httpStatus: 507, retryable: false, delivery: 'term' },
  UNSUPPORTED_OPERATION: { httpStatus: 400, retryable: false, delivery: 'term' },
  DOWNLOAD_FAILED: { httpStatus: 502, retryable: true, delivery: 'nak' },
  INFERENCE_FAILED: { httpStatus: 500, retryable: true, delivery: 'nak' },
  OVERLOADED: { httpStatus: 429, retryable: true, delivery: 'nak' },
  TIMEOUT: { httpStatus: 504, retryable: true, delivery: 'nak' },
  CANCELLED: { httpStatus: 499, retryable: false, delivery: 'term' },
  UNAVAILABLE: { httpStatus: 503, retryable: true, delivery: 'nak' },
  CONFIG_INVALID: { httpStatus: 500, retryable: false, delivery: 'term' },
  INTERNAL: { httpStatus: 500, retryable: true, delivery: 'nak' },
  PARTIAL_FAILURE: { httpStatus: 207, retryable: false, delivery: 'ack' },
  UNSUPPORTED_DOCUMENT: { httpStatus: 415, retryable: false, delivery: 'term' },
  DOCUMENT_ENCRYPTED: { httpStatus: 422, retryable: false, delivery: 'term' },
  DOCUMENT_CORRUPT: { httpStatus: 422, retryable: false, delivery: 'term' },
  DOCUMENT_EMPTY: { httpStatus: 422, retryable: false, delivery: 'term' },
  DOCUMENT_TOO_LARGE: { httpStatus: 413, retryable: false, delivery: 'term' },
});

export interface ShoalErrorOptions {
  cause?: unknown;
  /** Structured facts a caller can act on (field path, limit, model id...). Must be JSON-safe. */
  details?: Record<string, unknown>;
}

export class ShoalError extends Error {
  override readonly name = 'ShoalError';
  readonly code: ErrorCode;
  readonly details: Record<string, unknown> | undefined;

  constructor(code: ErrorCode, message: string, options: ShoalErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.details = options.details;
  }

  get traits(): ErrorTraits {
    return ERROR_TRAITS[this.code];
  }
}

export function isShoalError(value: unknown): value is ShoalError {
  return value instanceof ShoalError;
}

export function hasErrorCode(value: unknown, code: ErrorCode): boolean {
  return isShoalError(value) && value.code === code;
}

/** JSON form used on every wire (thread messages, HTTP bodies, NATS results). */
export interface SerializedError {
  code: ErrorCode;
  message: string;
  details?: Record<string, unknown>;
  cause?: string;
}

/** Whether a code read from the wire (a status, an event) is one of ours. */
export function isErrorCode(value: string): value is ErrorCode {
  return Object.hasOwn(ErrorCode, value);
}

function describeCause(cause: unknown): string | undefined {
  if (cause === undefined) return undefined;
  if (cause instanceof Error) return cause.message;
  return String(cause);
}

export function serializeError(error: unknown): SerializedError {
  const shoal = toShoalError(error);
  const out: SerializedError = { code: shoal.code, message: shoal.message };
  if (shoal.details !== undefined) out.details = shoal.details;
  const cause = describeCause(shoal.cause);
  if (cause !== undefined && cause !== shoal.message) out.cause = cause;
  return out;
}

export function deserializeError(data: SerializedError): ShoalError {
  const code = isErrorCode(data.code) ? data.code : ErrorCode.INTERNAL;
  const options: ShoalErrorOptions = {};
  if (data.details !== undefined) options.details = data.details;
  if (data.cause !== undefined) options.cause = new Error(data.cause);
  return new ShoalError(code, data.message, options);
}

/** Wraps anything thrown into a ShoalError, keeping the original as the cause. */
export function toShoalError(error: unknown, fallback: ErrorCode = ErrorCode.INTERNAL): ShoalError {
  if (isShoalError(error)) return error;
  const message = error instanceof Error ? error.message : String(error);
  return new ShoalError(fallback, message, { cause: error });
}
