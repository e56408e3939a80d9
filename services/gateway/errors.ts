import type { FastifyReply } from 'fastify';
import { ERROR_TRAITS, ErrorCode, ShoalError, toShoalError, type ErrorCode as Code } from '../../adapters/protocol/errors.js';
import { publicDetails, publicText } from './redact.js';

/**
 * The gateway's one mapping from failures to HTTP: the status comes from ERROR_TRAITS, the body
 * is always `{error: {code, message, details?}}`, and codes that mean "the same request will work
 * later" carry Retry-After. Fastify's own failures (body too large, unparsable JSON, wrong
 * content type) are first turned into ShoalErrors, so they take the same path.
 */

/**
 * Seconds a client should wait before retrying, per code; null where waiting does not help or the
 * server cannot know (a failed inference may fail again at once). Every code is listed so a new
 * code cannot be forgotten; only retryable codes may have a value (checked in the tests).
 */
export const RETRY_AFTER_SECONDS: Readonly<Record<Code, number | null>> = Object.freeze({
  INVALID_INPUT: null,
  INPUT_TOO_LARGE: null,
  UNSUPPORTED_MEDIA_TYPE: null,
  METHOD_NOT_ALLOWED: null,
  UNAUTHORIZED: null,
  MODEL_NOT_FOUND: null,
  NOT_FOUND: null,
  JOB_CONFLICT: null,
  PARTIAL_FAILURE: null,
  UNSUPPORTED_DOCUMENT: null,
  DOCUMENT_ENCRYPTED: null,
  DOCUMENT_CORRUPT: null,
  DOCUMENT_EMPTY: null,
  DOCUMENT_TOO_LARGE: null,
  MODEL_LOAD_FAILED: 30,
  MODEL_LOADING: 5,
  MODEL_TOO_LARGE: null,
  UNSUPPORTED_OPERATION: null,
  DOWNLOAD_FAILED: 30,
  INFERENCE_FAILED: null,
  OVERLOADED: 1,
  TIMEOUT: 1,
  CANCELLED: null,
  UNAVAILABLE: 5,
  CONFIG_INVALID: null,
  INTERNAL: null,
});

/** Longest path parameter (a job id, a model's org or name) the router matches: fastify's `maxParamLength`. */
export const MAX_PATH_PARAM_CHARS = 100;

export interface HttpError {
  status: number;
  headers: Record<string, string>;
  body: { error: { code: Code; message: string; details?: Record<string, unknown> } };
}

/** A retry hint the thrower knows better than the table (e.g. a model's remaining load time). */
function retryAfter(error: ShoalError): number | null {
  if (!error.traits.retryable) return null;
  const hinted = error.details?.retryAfterSeconds;
  if (typeof hinted === 'number' && Number.isFinite(hinted) && hinted >= 0) return Math.ceil(hinted);
  return RETRY_AFTER_SECONDS[error.code];
}

export function httpError(error: ShoalError): HttpError {
  const headers: Record<string, string> = {};
  const seconds = retryAfter(error);
  if (seconds !== null) headers['retry-after'] = String(seconds);
  if (error.code === ErrorCode.UNAUTHORIZED) headers['www-authenticate'] = 'Bearer realm="shoal"';
  // The body never shows the server's paths or stacks (redact.ts); the log line keeps them (app.ts).
  const body: HttpError['body'] = { error: { code: error.code, message: publicText(error.message) } };
  if (error.details !== undefined) body.error.details = publicDetails(error.details);
  return { status: ERROR_TRAITS[error.code].httpStatus, headers, body };
}

/** The fields of fastify's own errors that tell what went wrong, read without trusting their shape. */
function fastifyFacts(error: unknown): { code: string | undefined; statusCode: number | undefined } {
  if (typeof error !== 'object' || error === null) return { code: undefined, statusCode: undefined };
  const code = 'code' in error && typeof error.code === 'string' ? error.code : undefined;
  const statusCode = 'statusCode' in error && typeof error.statusCode === 'number' ? error.statusCode : undefined;
  return { code, statusCode };
}

/**
 * Anything a handler or fastify threw → ShoalError. Fastify reports body problems with a 4xx
 * statusCode before any handler runs; they are client errors with the codes of the table.
 */
export function fromFastifyError(error: unknown, bodyLimitBytes: number): ShoalError {
  if (error instanceof ShoalError) return error;
  const { code, statusCode } = fastifyFacts(error);
  const reason = error instanceof Error ? error.message : String(error);
  // The router's own refusals (app.ts passes them here through `frameworkErrors`); fastify's
  // messages quote the whole path, which a caller can make as long as the header limit allows.
  if (code === 'FST_ERR_BAD_URL') {
    return new ShoalError(ErrorCode.INVALID_INPUT, 'the URL path is not valid: a %-escape in it is malformed or does not decode to UTF-8', { cause: error });
  }
  if (code === 'FST_ERR_MAX_PARAM_LENGTH') {
    return new ShoalError(ErrorCode.INVALID_INPUT, `a path segment of the URL is longer than the gateway's limit of ${MAX_PATH_PARAM_CHARS} characters`, {
      cause: error,
      details: { limitChars: MAX_PATH_PARAM_CHARS },
    });
  }
  if (statusCode === 413 || code === 'FST_ERR_CTP_BODY_TOO_LARGE') {
    return new ShoalError(ErrorCode.INPUT_TOO_LARGE, `request body is larger than the gateway's limit of ${bodyLimitBytes} bytes`, {
      details: { limitBytes: bodyLimitBytes },
    });
  }
  if (statusCode === 415 || code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE') {
    return new ShoalError(ErrorCode.UNSUPPORTED_MEDIA_TYPE, 'send the request body as JSON with Content-Type: application/json', { cause: error });
  }
  if (code === 'FST_ERR_CTP_EMPTY_JSON_BODY') {
    return new ShoalError(ErrorCode.INVALID_INPUT, 'the request body is empty: send a JSON object', { cause: error });
  }
  if (error instanceof SyntaxError || code === 'FST_ERR_CTP_INVALID_JSON_BODY') {
    // fastify's parser gives one error for both and drops the cause: a body that is valid JSON
    // but holds a prototype-polluting key (secure-json-parse refuses them) lands here too.
    return new ShoalError(ErrorCode.INVALID_INPUT, `the request body is not valid JSON, or holds a "__proto__" or "constructor": {"prototype"} key, which the gateway refuses: ${reason}`, { cause: error });
  }
  if (statusCode !== undefined && statusCode >= 400 && statusCode < 500) {
    return new ShoalError(ErrorCode.INVALID_INPUT, reason, { cause: error });
  }
  return toShoalError(error);
}

export function sendError(reply: FastifyReply, error: ShoalError): FastifyReply {
  const { status, headers, body } = httpError(error);
  return reply.code(status).headers(headers).type('application/json; charset=utf-8').send(body);
}
