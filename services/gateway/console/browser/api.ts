import { browser } from './dom.js';
import { child, isRecord, text } from './schema.js';

/**
 * Calls to the gateway. The bearer token (when the gateway wants one) is asked for once, kept in
 * session storage (this tab only, gone when it closes) and sent as `Authorization: Bearer` with
 * every call; a 401 asks again (the token was wrong or was revoked) and the call is retried, all
 * the calls waiting on the same question.
 */

const TOKEN_KEY = 'shoal.console.token';

/** A refusal of the API: its HTTP status and the gateway's error code. */
export class ApiError extends Error {
  readonly status: number;
  readonly code: string;

  constructor(status: number, code: string, message: string) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.code = code;
  }
}

/** Shows the sign-in form and settles once a token was entered. */
type TokenPrompt = (rejected: boolean) => Promise<string>;

let prompt: TokenPrompt | null = null;
let asking: Promise<string> | null = null;

export function onTokenNeeded(ask: TokenPrompt): void {
  prompt = ask;
}

export function storedToken(): string | null {
  return browser.sessionStorage.getItem(TOKEN_KEY);
}

export function forgetToken(): void {
  browser.sessionStorage.removeItem(TOKEN_KEY);
}

async function askToken(rejected: boolean): Promise<void> {
  if (prompt === null) throw new ApiError(401, 'UNAUTHORIZED', 'this gateway requires a token');
  const ask = prompt;
  asking ??= ask(rejected).finally(() => {
    asking = null;
  });
  browser.sessionStorage.setItem(TOKEN_KEY, await asking);
}

/** A call with the token; a 401 asks for one (at most three times) and tries again. */
export async function call(path: string, init: { method?: string; body?: string | FormData; headers?: Record<string, string> } = {}): Promise<Response> {
  for (let attempt = 0; ; attempt += 1) {
    const token = storedToken();
    const headers = new Headers(init.headers);
    if (token !== null) headers.set('authorization', `Bearer ${token}`);
    const response = await fetch(path, { ...init, headers });
    if (response.status !== 401 || attempt >= 3) return response;
    if (token !== null) forgetToken();
    await askToken(token !== null);
  }
}

function refusal(status: number, body: unknown): ApiError {
  const error = isRecord(body) ? child(body, 'error') : undefined;
  const code = (error === undefined ? undefined : text(error, 'code')) ?? `HTTP_${status}`;
  const message = (error === undefined ? undefined : text(error, 'message')) ?? `the gateway answered ${status}`;
  return new ApiError(status, code, message);
}

/** A call whose answer is JSON; a refusal throws ApiError with the gateway's code and message. */
export async function callJson(path: string, init: { method?: string; body?: string | FormData; headers?: Record<string, string> } = {}): Promise<unknown> {
  const response = await call(path, init);
  const body: unknown = await response.json().catch(() => null);
  if (!response.ok) throw refusal(response.status, body);
  return body;
}

export function postJson(path: string, body: unknown): Promise<unknown> {
  return callJson(path, { method: 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json' } });
}

/** How a failure reads on the page: `CODE: message`. */
export function describeError(error: unknown): string {
  if (error instanceof ApiError) return `${error.code}: ${error.message}`;
  return error instanceof Error ? error.message : String(error);
}
