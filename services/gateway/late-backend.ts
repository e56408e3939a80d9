import type { NatsConnection } from '@nats-io/transport-node';
import type { NatsEngine } from '../../adapters/nats/rpc/engine-client.js';
import type { JobsClient } from '../../adapters/nats/jobs/jobs-client.js';
import type { CallOptions, Engine } from '../../adapters/protocol/engine.js';
import { ErrorCode, ShoalError } from '../../adapters/protocol/errors.js';
import type { JobsApi } from '../../adapters/protocol/jobs.js';
import type { EncodeRequest, ExtractRequest, ScoreRequest, TokenizeRequest } from '../../adapters/protocol/requests.js';
import type { ReadyReport } from './context.js';

/**
 * The gateway's NATS side, attached once connected. The HTTP port opens first, so while NATS is
 * unreachable (a broker starting later, wrong credentials) probes answer: /healthz 200, /readyz
 * 503 saying why, and every API call 503 UNAVAILABLE, instead of a port that never opens.
 */

export interface NatsBackend {
  nc: NatsConnection;
  engine: NatsEngine;
  jobs: JobsClient;
}

export class LateBackend {
  readonly engine: Engine;
  readonly jobs: JobsApi;
  readonly #servers: string;
  #backend: NatsBackend | null = null;
  #lastFailure: string | null = null;

  constructor(servers: string) {
    this.#servers = servers;
    const backend = (): NatsBackend => this.require();
    this.engine = {
      encode: (request: EncodeRequest, options?: CallOptions) => backend().engine.encode(request, options),
      score: (request: ScoreRequest, options?: CallOptions) => backend().engine.score(request, options),
      extract: (request: ExtractRequest, options?: CallOptions) => backend().engine.extract(request, options),
      tokenize: (request: TokenizeRequest, options?: CallOptions) => backend().engine.tokenize(request, options),
      close: async () => this.#backend?.engine.close(),
    };
    this.jobs = {
      submit: (submission) => backend().jobs.submit(submission),
      status: (jobId) => backend().jobs.status(jobId),
      results: (jobId) => backend().jobs.results(jobId),
      // Without it the ingest route's check of its models found nothing to call and let every model through.
      checkModel: (primitive, model) => backend().jobs.checkModel(primitive, model),
    };
  }

  attach(backend: NatsBackend): void {
    this.#backend = backend;
  }

  get attached(): NatsBackend | null {
    return this.#backend;
  }

  /** The connected backend, or UNAVAILABLE while the gateway is still connecting. */
  require(): NatsBackend {
    if (this.#backend !== null) return this.#backend;
    throw new ShoalError(ErrorCode.UNAVAILABLE, `the gateway is not connected to NATS yet (connecting to ${this.#servers}); retry shortly`, {
      details: { retryAfterSeconds: 5 },
    });
  }

  /** Records why the latest connection attempt failed, for the readiness probe. */
  attemptFailed(failure: ShoalError, attempt: number): void {
    this.#lastFailure = `attempt ${attempt} failed: ${failure.code}: ${failure.message}`;
  }

  /** Readiness before the connection: not ready, and why (the last attempt's reason, once there is one). */
  notConnected(): ReadyReport {
    const why = this.#lastFailure === null ? '' : ` (${this.#lastFailure})`;
    return { ready: false, reason: `connecting to NATS at ${this.#servers}${why}` };
  }
}
