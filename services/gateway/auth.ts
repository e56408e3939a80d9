import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import { Counter } from 'prom-client';
import type { ShoalMetrics } from '../../adapters/observability/metrics.js';
import { ErrorCode, ShoalError } from '../../adapters/protocol/errors.js';

/**
 * Optional bearer-token authentication. Tokens are compared as SHA-256 digests with
 * timingSafeEqual, against every configured token without stopping at a match, so neither the
 * length of a token nor which one matched shows in the response time. Probes (/healthz, /readyz)
 * the API description (/openapi.json, /docs) and the web console's static files (/ui) are always open: orchestrators call them without credentials. /metrics is open unless
 * configured otherwise (Prometheus scrapers are often set up without tokens).
 */

export interface AuthOptions {
  /** Accepted tokens; empty = authentication off. */
  tokens: readonly string[];
  /** Require a token on /metrics too. */
  protectMetrics: boolean;
  /** Told of every refused request (no token, or a wrong one), for the log and the failed-login counter. */
  onRefused?: (reason: 'missing' | 'invalid', request: FastifyRequest) => void;
}

/**
 * The probes, the API description (routes/api-docs.ts: built from the code, nothing of the
 * deployment in it) and the web console's page (routes/console.ts: static, no data; it asks for
 * the token and sends it with every API call it makes).
 */
const ALWAYS_OPEN: ReadonlySet<string> = new Set(['/healthz', '/readyz', '/openapi.json', '/docs', '/ui']);
/** Swagger UI's static files under /docs/, the console's under /ui/. */
const OPEN_PREFIXES: readonly string[] = ['/docs/', '/ui/'];

function digest(value: string): Buffer {
  return createHash('sha256').update(value, 'utf8').digest();
}

/** The token of an `Authorization: Bearer <token>` header, or null. */
function bearerToken(header: string | undefined): string | null {
  if (header === undefined) return null;
  const match = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(header);
  return match?.[1] ?? null;
}

export class BearerAuth {
  readonly #digests: readonly Buffer[];
  readonly #open: ReadonlySet<string>;
  readonly #onRefused: AuthOptions['onRefused'];

  constructor(options: AuthOptions) {
    this.#digests = options.tokens.map(digest);
    this.#onRefused = options.onRefused;
    this.#open = options.protectMetrics ? ALWAYS_OPEN : new Set([...ALWAYS_OPEN, '/metrics']);
  }

  get enabled(): boolean {
    return this.#digests.length > 0;
  }

  /** Whether `token` is one of the configured tokens, in time independent of which (or whether). */
  accepts(token: string): boolean {
    const candidate = digest(token);
    let matched = false;
    for (const known of this.#digests) matched = timingSafeEqual(candidate, known) || matched;
    return matched;
  }

  /** Throws UNAUTHORIZED unless the request may pass. CORS preflights carry no credentials by design. */
  check(request: FastifyRequest): void {
    if (!this.enabled || request.method === 'OPTIONS') return;
    const path = request.url.split('?', 1)[0] ?? request.url;
    if (this.#open.has(path) || OPEN_PREFIXES.some((prefix) => path.startsWith(prefix))) return;
    const token = bearerToken(request.headers.authorization);
    if (token === null) {
      this.#onRefused?.('missing', request);
      throw new ShoalError(ErrorCode.UNAUTHORIZED, 'this gateway requires a token: send Authorization: Bearer <token>');
    }
    if (!this.accepts(token)) {
      this.#onRefused?.('invalid', request);
      throw new ShoalError(ErrorCode.UNAUTHORIZED, 'the bearer token is not valid');
    }
  }
}

const AUTH_FAILURES = 'shoal_auth_failures_total';

/** `shoal_auth_failures_total{reason="missing"|"invalid"}` on the gateway's registry (one per registry). */
export function authFailureCounter(metrics: ShoalMetrics): Counter<'reason'> {
  const existing = metrics.registry.getSingleMetric(AUTH_FAILURES);
  if (existing instanceof Counter) return existing as Counter<'reason'>;
  return new Counter({ name: AUTH_FAILURES, help: 'Requests refused for a missing or wrong bearer token', labelNames: ['reason'] as const, registers: [metrics.registry] });
}
