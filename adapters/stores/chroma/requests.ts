import type { ChromaClient } from 'chromadb';
import { ErrorCode, ShoalError } from '../../protocol/errors.js';

/**
 * A time bound on every HTTP request a ChromaClient makes. chromadb 3.5.0 takes no timeout and no
 * fetch of our own: its `fetchOptions` are copied once into every request (one signal for the
 * client's whole life, not one per request), and its hey-api client then sends each request
 * through `chromaFetch`, which turns any failure of `fetch` into a bare "Failed to connect"
 * ChromaConnectionError. Without a bound, a server that accepts connections and never answers
 * holds a call for undici's 300-s headers timeout. So the client's inner hey-api client (its
 * private `apiClient`; `setConfig`/`getConfig` are hey-api's own API) gets a fetch that wraps
 * Chroma's: each request carries `AbortSignal.timeout(ms)`, which also cuts a body that stops
 * arriving, and a request cut by it fails with that signal's `TimeoutError` (a DOMException),
 * whatever Chroma's fetch made of it.
 */

/** Longest wait for one Chroma request (as Qdrant's client timeout). */
export const DEFAULT_CHROMA_REQUEST_TIMEOUT_MS = 60_000;
/** The longest delay a Node timer takes. */
const MAX_TIMEOUT_MS = 2_147_483_647;

/** The part of hey-api's client (`@hey-api/client-fetch`) this needs. */
interface FetchConfig {
  getConfig(): { fetch?: unknown };
  setConfig(config: { fetch: typeof fetch }): unknown;
}

function isFetchConfig(value: unknown): value is FetchConfig {
  if (typeof value !== 'object' || value === null) return false;
  return typeof Reflect.get(value, 'getConfig') === 'function' && typeof Reflect.get(value, 'setConfig') === 'function';
}

function isFetch(value: unknown): value is typeof fetch {
  return typeof value === 'function';
}

/** Whether an error is the one a request cut by its time bound fails with. */
export function isRequestTimeout(error: unknown): boolean {
  return error instanceof Error && error.name === 'TimeoutError';
}

/** `timeoutMs` checked: a whole number of milliseconds a timer can wait. */
export function checkRequestTimeout(timeoutMs: number, where: string): number {
  if (!Number.isInteger(timeoutMs) || timeoutMs < 1 || timeoutMs > MAX_TIMEOUT_MS) {
    throw new ShoalError(ErrorCode.INVALID_INPUT, `${where}: the request timeout must be a whole number of milliseconds from 1 to ${MAX_TIMEOUT_MS} (got ${timeoutMs})`);
  }
  return timeoutMs;
}

/** `inner` with each request bounded by `timeoutMs`; the caller's own signal, if any, still aborts it. */
function boundedFetch(inner: typeof fetch, timeoutMs: number): typeof fetch {
  return async (input, init) => {
    const deadline = AbortSignal.timeout(timeoutMs);
    const own = init?.signal ?? (input instanceof Request ? input.signal : null);
    try {
      return await inner(input, { ...init, signal: own === null ? deadline : AbortSignal.any([own, deadline]) });
    } catch (error) {
      // Chroma's fetch reports the abort as a connection failure without its cause.
      if (!deadline.aborted) throw error;
      const reason: unknown = deadline.reason;
      throw reason;
    }
  };
}

/**
 * Bounds every request of `client` (and of the collections it returns, which share its inner
 * client) by `timeoutMs`. Throws INTERNAL when the client has no inner client to hook, so a
 * chromadb upgrade that moves it fails at once rather than leaving requests unbounded.
 */
export function boundChromaRequests(client: ChromaClient, timeoutMs: number): void {
  const inner: unknown = Reflect.get(client, 'apiClient');
  const current = isFetchConfig(inner) ? inner.getConfig().fetch : undefined;
  if (!isFetchConfig(inner) || !isFetch(current)) {
    throw new ShoalError(ErrorCode.INTERNAL, 'the chromadb client has no inner HTTP client whose requests can be bounded (this sink is written for chromadb 3.5.0)');
  }
  inner.setConfig({ fetch: boundedFetch(current, timeoutMs) });
}
