import { z } from 'zod';
import { ErrorCode, ShoalError } from '../protocol/errors.js';
import { parseWith } from '../protocol/validate.js';

/**
 * HTTP against a Hugging Face compatible hub: the repository listing
 * (`GET /api/models/{repo}/revision/{rev}?blobs=true`) and file requests
 * (`GET /{repo}/resolve/{commit}/{path}`), with the hub's status codes mapped to Shoal's codes and
 * an idle timeout instead of a whole-request one, so a large file on a slow link is not cut off
 * while data still flows.
 */

export interface HubConnection {
  /** Hub base URL (HF_ENDPOINT), e.g. https://huggingface.co or a mirror; a path prefix is kept. */
  endpoint: string;
  /** Sent as `Authorization: Bearer <token>` (HF_TOKEN). */
  token?: string | undefined;
  /** Abort a request when no response or body bytes arrived for this long. @default 60000 */
  idleTimeoutMs?: number | undefined;
}

export const DEFAULT_IDLE_TIMEOUT_MS = 60_000;

const Sha256 = z.string().regex(/^[0-9a-f]{64}$/, 'expected a sha256 (64 hex digits)');
const GitSha1 = z.string().regex(/^[0-9a-f]{40}$/, 'expected a git sha1 (40 hex digits)');

export const RepoSibling = z.looseObject({
  rfilename: z.string().min(1),
  size: z.number().int().nonnegative().optional(),
  /** git blob sha1 of the file (of its LFS pointer for LFS files). */
  blobId: GitSha1.optional(),
  lfs: z.looseObject({ sha256: Sha256, size: z.number().int().nonnegative().optional() }).nullable().optional(),
});
export type RepoSibling = z.infer<typeof RepoSibling>;

export const RepoInfo = z.looseObject({
  sha: GitSha1,
  siblings: z.array(RepoSibling),
});
export type RepoInfo = z.infer<typeof RepoInfo>;

/**
 * Failures worth another attempt (network errors, timeouts, 5xx, 429, a broken or corrupted
 * transfer). Kept as a private set rather than a message or a subclass: callers outside this
 * folder only ever see the ShoalError and its code.
 */
const transientErrors = new WeakSet<ShoalError>();

export function transient(error: ShoalError): ShoalError {
  transientErrors.add(error);
  return error;
}

export function isTransient(error: unknown): boolean {
  return error instanceof ShoalError && transientErrors.has(error);
}

export function hubUrl(connection: HubConnection, path: string): string {
  return `${connection.endpoint.replace(/\/+$/, '')}/${path}`;
}

function requestHeaders(connection: HubConnection, extra: Record<string, string>): Record<string, string> {
  const out: Record<string, string> = { 'user-agent': 'shoal/0.1', ...extra };
  if (connection.token !== undefined && connection.token !== '') out.authorization = `Bearer ${connection.token}`;
  return out;
}

/** The hub's own explanation (`X-Error-Message`), when it gives one. */
function hubMessage(response: Response): string {
  const message = response.headers.get('x-error-message');
  return message === null || message === '' ? '' : ` (hub says: ${message.slice(0, 300)})`;
}

function statusError(response: Response, url: string, what: string): ShoalError {
  const status = response.status;
  const says = hubMessage(response);
  if (status === 401 || status === 403) {
    // The hub answers 401 for private, gated and missing repositories alike when no token is sent.
    return new ShoalError(
      ErrorCode.MODEL_NOT_FOUND,
      `${what}: the hub refused access (HTTP ${status})${says}; check the model id, and set HF_TOKEN for gated or private models`,
      { details: { status } },
    );
  }
  if (status === 404) return new ShoalError(ErrorCode.MODEL_NOT_FOUND, `${what}: not found on the hub (${url})${says}`, { details: { status } });
  const error = new ShoalError(ErrorCode.DOWNLOAD_FAILED, `${what}: HTTP ${status} from ${url}${says}`, { details: { status } });
  return status === 408 || status === 429 || status >= 500 ? transient(error) : error;
}

/**
 * A request whose idle timer the caller keeps alive while reading the body (`touch()` per chunk)
 * and must `close()` when done with it.
 */
export interface HubResponse {
  response: Response;
  touch(): void;
  close(): void;
  /** Whether the idle timer fired (the error the caller sees is then an abort). */
  timedOut(): boolean;
}

/**
 * GET with the token, following redirects (the hub sends LFS files to a CDN; fetch drops the
 * Authorization header on cross-origin redirects). Statuses other than 2xx and 416 (left to the
 * resuming caller) become ShoalErrors.
 */
export async function hubGet(connection: HubConnection, url: string, what: string, extraHeaders: Record<string, string> = {}): Promise<HubResponse> {
  const idleMs = connection.idleTimeoutMs ?? DEFAULT_IDLE_TIMEOUT_MS;
  const controller = new AbortController();
  let fired = false;
  const timer = setTimeout(() => {
    fired = true;
    controller.abort();
  }, idleMs);
  const handle: Omit<HubResponse, 'response'> = {
    touch: () => timer.refresh(),
    close: () => clearTimeout(timer),
    timedOut: () => fired,
  };
  let response: Response;
  try {
    response = await fetch(url, { headers: requestHeaders(connection, extraHeaders), signal: controller.signal, redirect: 'follow' });
  } catch (error) {
    handle.close();
    throw networkError(what, url, error, fired, idleMs);
  }
  if (!response.ok && response.status !== 416) {
    handle.close();
    await discardBody(response);
    throw statusError(response, url, what);
  }
  return { response, ...handle };
}

/** Releases the connection of a response whose body will not be read. */
export async function discardBody(response: Response): Promise<void> {
  if (response.bodyUsed || response.body === null) return;
  await response.body.cancel().catch(() => undefined); // cancelling can only fail on a stream already closed
}

export function networkError(what: string, url: string, error: unknown, timedOut: boolean, idleMs: number): ShoalError {
  const why = timedOut ? `no data for ${idleMs} ms` : error instanceof Error ? (error.cause instanceof Error ? `${error.message}: ${error.cause.message}` : error.message) : String(error);
  return transient(new ShoalError(ErrorCode.DOWNLOAD_FAILED, `${what}: transfer from ${url} failed (${why})`, { cause: error }));
}

/** The listing of `repo@revision`: its commit and every file with size and checksums. */
export async function fetchRepoInfo(repo: string, revision: string, connection: HubConnection): Promise<RepoInfo> {
  const url = hubUrl(connection, `api/models/${repo}/revision/${encodeURIComponent(revision)}?blobs=true`);
  const what = `model ${repo}@${revision}`;
  const request = await hubGet(connection, url, what);
  let body: unknown;
  try {
    body = await request.response.json();
  } catch (error) {
    if (request.timedOut()) throw networkError(what, url, error, true, connection.idleTimeoutMs ?? DEFAULT_IDLE_TIMEOUT_MS);
    throw new ShoalError(ErrorCode.DOWNLOAD_FAILED, `${what}: the hub answered ${url} with invalid JSON`, { cause: error });
  } finally {
    request.close();
  }
  return parseWith(RepoInfo, body, `hub listing of ${repo}@${revision} (${url})`, ErrorCode.DOWNLOAD_FAILED);
}
