import { ErrorCode, ShoalError, isShoalError } from '../protocol/errors.js';

/**
 * SDK and network failures as Shoal's error codes, so callers decide by code: a store that is
 * down, slow or throttling is UNAVAILABLE (retryable: nak, retry later); a missing object or
 * bucket is NOT_FOUND; refused credentials or a missing region are CONFIG_INVALID (retrying will
 * not help until someone fixes the settings). Messages name the operation and the S3 error,
 * never a credential.
 */

/** Node's and the SDK's names for a connection that could not be made or was cut. */
const NETWORK_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'ECONNABORTED', 'UND_ERR_SOCKET']);
const THROTTLING = new Set(['SlowDown', 'Throttling', 'ThrottlingException', 'RequestTimeout', 'RequestTimeTooSkewed', 'InternalError', 'ServiceUnavailable', 'TooManyRequestsException']);
const MISSING = new Set(['NoSuchKey', 'NotFound', 'NoSuchBucket', 'NoSuchUpload']);
const DENIED = new Set(['AccessDenied', 'InvalidAccessKeyId', 'SignatureDoesNotMatch', 'ExpiredToken', 'InvalidToken', 'AllAccessDisabled', 'CredentialsProviderError']);

interface SdkLike {
  name?: unknown;
  code?: unknown;
  message?: unknown;
  $metadata?: { httpStatusCode?: unknown };
  $retryable?: unknown;
}

function fields(error: unknown): SdkLike {
  return typeof error === 'object' && error !== null ? (error as SdkLike) : {};
}

/** The S3 error name of a failure (`NoSuchKey`...), or null when it is not a service answer. */
export function s3ErrorName(error: unknown): string | null {
  const { name } = fields(error);
  return typeof name === 'string' ? name : null;
}

export function isMissing(error: unknown): boolean {
  if (isShoalError(error)) return error.code === ErrorCode.NOT_FOUND;
  const { $metadata } = fields(error);
  return MISSING.has(s3ErrorName(error) ?? '') || $metadata?.httpStatusCode === 404;
}

export function toS3Error(error: unknown, what: string): ShoalError {
  if (isShoalError(error)) return error;
  const { name, code, message, $metadata } = fields(error);
  const status = typeof $metadata?.httpStatusCode === 'number' ? $metadata.httpStatusCode : undefined;
  const label = typeof name === 'string' ? name : 'Error';
  const text = `${what}: ${label}${typeof message === 'string' && message !== '' ? `: ${message.slice(0, 300)}` : ''}${status === undefined ? '' : ` (HTTP ${status})`}`;
  const errorCode = typeof code === 'string' ? code : '';
  if (label === 'AbortError' || errorCode === 'ABORT_ERR') return new ShoalError(ErrorCode.CANCELLED, `${what}: cancelled`, { cause: error });
  if (MISSING.has(label) || status === 404) return new ShoalError(ErrorCode.NOT_FOUND, text, { cause: error });
  if (DENIED.has(label) || status === 403 || status === 401) {
    return new ShoalError(ErrorCode.CONFIG_INVALID, `${text}; check the S3 credentials (AWS_ACCESS_KEY_ID/AWS_PROFILE) and the bucket policy`, { cause: error });
  }
  if (typeof message === 'string' && /region is missing/i.test(message)) {
    return new ShoalError(ErrorCode.CONFIG_INVALID, `${what}: no S3 region configured (set AWS_REGION)`, { cause: error });
  }
  if (label === 'TimeoutError' || NETWORK_CODES.has(errorCode) || NETWORK_CODES.has(label) || THROTTLING.has(label) || (status !== undefined && status >= 500) || status === 429) {
    return new ShoalError(ErrorCode.UNAVAILABLE, text, { cause: error });
  }
  if (status !== undefined && status >= 400) return new ShoalError(ErrorCode.INVALID_INPUT, text, { cause: error });
  // Anything else without an HTTP answer is a transport failure (socket hang up, DNS, TLS).
  return new ShoalError(ErrorCode.UNAVAILABLE, text, { cause: error });
}
