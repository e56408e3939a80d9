import type { IngestRunStatus } from '../../adapters/protocol/ingest.js';

/**
 * What an HTTP error body may say about the server: error messages are written for operators
 * (they name the model folders looked in, the hub cache, the file roots, a Node error's stack),
 * and a caller must not learn the gateway's or the workers' file layout from them. The body keeps
 * the message with every absolute path cut to its last segment (`…/name`, usually what the caller
 * sent) and stack lines and Node-internal module names removed; the gateway's log keeps the full
 * text (app.ts logs the message before the body is built).
 */

/** First segments of the gateway's own URL paths, which messages quote (`use /v1/jobs/<id>`) and which are not files. */
const ROUTE_ROOTS = new Set(['v1', 'models', 'embed', 'embed_sparse', 'embed_all', 'rerank', 'predict', 'tokenize', 'decode', 'info', 'health', 'healthz', 'readyz', 'metrics', 'openai']);

/** Characters that end a path in running text (quotes, brackets, separators). */
const PATH_CHAR = String.raw`[^\s'"\`,;()\[\]{}<>]`;

/**
 * An absolute POSIX path of two segments or more (`/srv/models/x`), not inside a URL (`http://h/a`,
 * `nats://h`) nor a relative path (`a/b`): the character before it is not a word character, a
 * colon, a slash, a dot or a dash. `file:///abs/path` URLs are matched apart, with their scheme.
 */
const POSIX_PATH = new RegExp(String.raw`(?<![\w:/.\-])/(?:${PATH_CHAR}+/)+${PATH_CHAR}*`, 'g');
const FILE_URL = new RegExp(String.raw`file://(?:localhost)?/(?:${PATH_CHAR}+/)*${PATH_CHAR}*`, 'gi');
/** `C:\Users\x\models` (and `C:/…`): a Windows absolute path. */
const WINDOWS_PATH = new RegExp(String.raw`\b[A-Za-z]:[\\/](?:[^\s'"\`,;()\[\]{}<>\\/]+[\\/])*[^\s'"\`,;()\[\]{}<>\\/]*`, 'g');
/** Node's own modules, as a stack or an internal assertion quotes them. */
const NODE_INTERNAL = /\bnode:internal\/[\w/.-]+(?::\d+)*/g;
/** From the first stack line on (`\n    at fn (file:line:col)`), everything is a stack. */
const STACK = /\n\s+at [\s\S]*$/;

function lastSegment(path: string): string {
  const segments = path.split(/[\\/]+/).filter((segment) => segment !== '');
  return segments.at(-1) ?? '';
}

function redactPosix(path: string): string {
  const first = path.split('/', 2)[1] ?? '';
  if (ROUTE_ROOTS.has(first)) return path;
  const last = lastSegment(path);
  return last === '' ? '…/' : `…/${last}`;
}

/** `text` as an HTTP body may say it: absolute paths cut to their last segment, stacks and Node internals removed. */
export function publicText(text: string): string {
  return text
    .replace(STACK, '')
    .replace(NODE_INTERNAL, '<node internals>')
    .replace(FILE_URL, (url) => `file://…/${lastSegment(url.slice('file://'.length))}`)
    .replace(WINDOWS_PATH, (path) => `…\\${lastSegment(path)}`)
    .replace(POSIX_PATH, redactPosix);
}

/** Error details as an HTTP body may show them: every string within redacted as publicText does. */
export function publicDetails(details: Readonly<Record<string, unknown>>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(details)) out[key] = publicValue(value);
  return out;
}

function publicValue(value: unknown): unknown {
  if (typeof value === 'string') return publicText(value);
  if (Array.isArray(value)) return value.map(publicValue);
  if (typeof value === 'object' && value !== null) return publicDetails(Object.fromEntries(Object.entries(value)));
  return value;
}

/** A worker's error as a job's status or results show it: message, details and cause redacted as error bodies are. */
export function publicWireError<E extends { message: string; details?: Record<string, unknown> | undefined; cause?: string | undefined }>(error: E): E {
  return {
    ...error,
    message: publicText(error.message),
    ...(error.details === undefined ? {} : { details: publicDetails(error.details) }),
    ...(error.cause === undefined ? {} : { cause: publicText(error.cause) }),
  };
}

/** An ingest run's status as clients see it: the coordinator's bookkeeping (lease, heartbeat, content hash, ledger position) stays inside. */
export type PublicIngestRunStatus = Omit<IngestRunStatus, 'lease' | 'heartbeat_at' | 'heartbeat_ms' | 'content_hash' | 'counted_seq'>;

/**
 * An ingest run's status as a client reads it: without the bookkeeping (as a job's status), and
 * each failed document's reason, the run's error and the degraded mark redacted as error bodies
 * are. `source` stays whole: it is the reference the client sent, which names the document.
 * `updated_at` still moves with every heartbeat, so a client sees a live run.
 */
export function publicIngestStatus(status: IngestRunStatus): PublicIngestRunStatus {
  const { lease: _lease, heartbeat_at: _beat, heartbeat_ms: _every, content_hash: _hash, counted_seq: _counted, ...visible } = status;
  return {
    ...visible,
    failed: status.failed.map((failure) => ({ ...failure, reason: publicText(failure.reason) })),
    ...(status.error === undefined ? {} : { error: { ...status.error, message: publicText(status.error.message) } }),
    ...(status.degraded === undefined ? {} : { degraded: { ...status.degraded, reason: publicText(status.degraded.reason) } }),
  };
}
