import Fastify, { type FastifyInstance } from 'fastify';
import type { Logger } from '../../adapters/observability/logger.js';
import type { ShoalMetrics } from '../../adapters/observability/metrics.js';
import type { Engine } from '../../adapters/protocol/engine.js';
import { ErrorCode, ShoalError } from '../../adapters/protocol/errors.js';
import type { JobsApi } from '../../adapters/protocol/jobs.js';
import { natsNames, type NatsNames } from '../../adapters/protocol/subjects.js';
import { BearerAuth } from './auth.js';
import { callWithDeadline, type CallRunner } from './call-context.js';
import { registerCors } from './cors.js';
import { fromFastifyError, sendError } from './errors.js';
import { RequestMetrics } from './request-metrics.js';
import { registerHealthRoutes } from './routes/health.js';
import { registerJobRoutes } from './routes/jobs.js';
import { registerModelRoutes } from './routes/models.js';
import { registerOpenAiRoutes } from './routes/openai.js';
import { registerPrimitiveRoutes } from './routes/primitives.js';
import { registerTeiRoutes } from './routes/tei.js';

/**
 * The HTTP app, built from what it serves (an Engine, a JobsApi, a model list, readiness) and its
 * settings. It knows nothing about NATS or worker threads: main.ts injects NATS clients, tests and
 * embedders inject the in-process engine. Hook order matters: CORS headers first (so even a 401
 * carries them), then authentication, then the route.
 */

/** One entry of GET /v1/models: the id clients put in `model`, plus what is known about it. */
export interface ModelCard {
  id: string;
  /** Model family (dense, cross-encoder, splade...), when known. */
  family?: string;
  /** Primitives the model answers. */
  primitives?: readonly string[];
  /** Loaded on some worker right now. */
  resident?: boolean;
}

export interface ReadyReport {
  ready: boolean;
  /** Why not, for the 503 body. */
  reason?: string;
}

export interface GatewayDeps {
  engine: Engine;
  /** Asynchronous jobs; null when the gateway runs without JetStream (POST /v1/jobs answers UNAVAILABLE). */
  jobs: JobsApi | null;
  models(): Promise<readonly ModelCard[]>;
  metrics: ShoalMetrics;
  /** Whether requests can be served now (backends connected, workers present). */
  ready(): Promise<ReadyReport>;
  logger?: Logger;
}

export interface GatewaySettings {
  /** Bearer tokens; empty = no authentication. */
  apiTokens: readonly string[];
  /** Require a token on /metrics as well. */
  protectMetrics: boolean;
  /** Largest request body. */
  bodyLimitBytes: number;
  /** Longest time one synchronous call may take before it answers TIMEOUT. */
  requestTimeoutMs: number;
  /** Browser origins allowed cross-origin; empty = CORS off. */
  corsOrigins: readonly string[];
  /** Model of TEI's /embed (TEI requests name no model). */
  embedModel: string | null;
  /** Model of TEI's /rerank. */
  rerankModel: string | null;
  /** NATS subject prefix, to tell clients where job results are published. */
  natsPrefix: string;
}

/** What every route file receives. */
export interface RouteContext {
  deps: GatewayDeps;
  settings: GatewaySettings;
  names: NatsNames;
  metrics: RequestMetrics;
  /** Runs one engine call for this reply: aborted on client disconnect, TIMEOUT after the deadline. */
  call(reply: Parameters<typeof callWithDeadline>[0]): CallRunner;
  /** True once shutdown began (readiness turns false so load balancers stop sending). */
  closing(): boolean;
}

export function buildGatewayApp(deps: GatewayDeps, settings: GatewaySettings): FastifyInstance {
  // Fastify's own request logging stays off: failures are logged below, with their codes.
  const app = Fastify({ bodyLimit: settings.bodyLimitBytes, logger: false, return503OnClosing: true, forceCloseConnections: 'idle' });
  // JSON only: a text/plain body would otherwise reach the schemas as a string.
  app.removeContentTypeParser('text/plain');
  const metrics = new RequestMetrics(deps.metrics);
  const auth = new BearerAuth({ tokens: settings.apiTokens, protectMetrics: settings.protectMetrics });
  let closing = false;

  registerCors(app, { origins: settings.corsOrigins });
  app.addHook('onRequest', async (request) => auth.check(request));
  app.addHook('preClose', async () => {
    closing = true;
  });
  // Responses finished during shutdown close their keep-alive connection, so close() need not wait for clients to hang up.
  app.addHook('onSend', async (_request, reply) => {
    if (closing) reply.header('connection', 'close');
  });
  metrics.register(app);

  app.setErrorHandler(async (error, request, reply) => {
    const shoal = fromFastifyError(error, settings.bodyLimitBytes);
    metrics.failed(request, shoal.code);
    if (shoal.traits.httpStatus >= 500) deps.logger?.warn({ code: shoal.code, err: shoal, url: request.url }, 'request failed');
    return sendError(reply, shoal);
  });
  app.setNotFoundHandler(async (request, reply) =>
    sendError(
      reply,
      new ShoalError(ErrorCode.NOT_FOUND, `no route ${request.method} ${request.url.split('?', 1)[0] ?? ''}`, {
        details: { method: request.method },
      }),
    ),
  );

  const context: RouteContext = {
    deps,
    settings,
    names: natsNames(settings.natsPrefix),
    metrics,
    call: (reply) => callWithDeadline(reply, settings.requestTimeoutMs),
    closing: () => closing,
  };
  registerHealthRoutes(app, context);
  registerPrimitiveRoutes(app, context);
  registerJobRoutes(app, context);
  registerModelRoutes(app, context);
  registerOpenAiRoutes(app, context);
  registerTeiRoutes(app, context);
  return app;
}
