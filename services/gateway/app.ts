import { randomUUID } from 'node:crypto';
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import { ErrorCode, ShoalError } from '../../adapters/protocol/errors.js';
import { regexLiteral } from '../../adapters/protocol/regex-literal.js';
import { natsNames } from '../../adapters/protocol/subjects.js';
import { Admission, DEFAULT_ADMISSION, admittedEngine } from './admission.js';
import { BearerAuth, authFailureCounter } from './auth.js';
import { callWithDeadline } from './call-context.js';
import { ClassifyRuns } from './classify-runs.js';
import type { GatewayDeps, GatewaySettings, RouteContext } from './context.js';
import { registerCors } from './cors.js';
import { checkBodyType } from './routes/image-body.js';
import { MAX_PATH_PARAM_CHARS, fromFastifyError, sendError } from './errors.js';
import { ModelFactsCache } from './model-facts.js';
import { IndexOutages } from './index-outages.js';
import { RequestMetrics } from './request-metrics.js';
import { registerApiDocsRoutes } from './routes/api-docs.js';
import { registerClassifyRoutes } from './routes/classify.js';
import { registerConsoleRoutes } from './routes/console.js';
import { registerHealthRoutes } from './routes/health.js';
import { registerIngestRoutes } from './routes/ingest.js';
import { IndexPool } from './index-pool.js';
import { registerIndexRoutes } from './routes/indexes.js';
import { registerJobRoutes } from './routes/jobs.js';
import { registerModelRoutes } from './routes/models.js';
import { registerOpenAiRoutes } from './routes/openai.js';
import { registerPrimitiveRoutes } from './routes/primitives.js';
import { registerSearchRoutes } from './routes/search.js';
import { registerTeiRoutes } from './routes/tei.js';
import { registerTeiInfoRoutes } from './routes/tei-info.js';
import { registerTeiSparseRoutes } from './routes/tei-sparse.js';
import { registerTeiTokenizeRoutes } from './routes/tei-tokenize.js';

/**
 * The HTTP app, built from what it serves (an Engine, a JobsApi, a model list, readiness) and its
 * settings. It knows nothing about NATS or worker threads: main.ts injects NATS clients, tests and
 * embedders inject the in-process engine. Hook order matters: the request id and CORS headers
 * first (so even a 401 carries them), then authentication, then the route.
 */

/**
 * The path of a request URL for the logs, without its query string: a client that puts a token in
 * `?access_token=` (refused: tokens go in the Authorization header) must not get it written down.
 */
function pathOf(url: string): string {
  return (url.split('?', 1)[0] ?? '').slice(0, 200);
}

/**
 * The id of a request, sent back as `X-Request-Id` and written in its log lines, so a caller's
 * report and the gateway's log meet. A caller's own id (a tracing proxy's, a client's retry
 * marker) is kept when it is a short plain token; anything else (spaces, control characters,
 * over 200 characters) could forge or flood a log line and is replaced by a fresh UUID.
 */
const CALLER_REQUEST_ID = /^[A-Za-z0-9._:/+=@-]{1,200}$/;

function requestId(header: string | string[] | undefined): string {
  return typeof header === 'string' && CALLER_REQUEST_ID.test(header) ? header : randomUUID();
}

/** The methods the gateway's routes use, tried for a 405's Allow header. */
const ROUTE_METHODS: readonly string[] = ['GET', 'POST', 'DELETE'];

/**
 * The registered routes as patterns, to tell a known path called with another method (405 with
 * Allow) from an unknown path (404). `app.hasRoute` compares route definitions, so it found only
 * static routes: `DELETE /v1/jobs/abc` or `GET /models/x/embed` were "no route".
 */
class RoutePatterns {
  readonly #routes: Array<{ method: string; pattern: RegExp }> = [];

  add(methods: string | readonly string[], url: string): void {
    const source = url
      .split('/')
      .map((segment) => (segment.startsWith(':') ? '[^/]+' : segment === '*' ? '.*' : regexLiteral(segment)))
      .join('/');
    const pattern = new RegExp(`^${source}$`);
    for (const method of typeof methods === 'string' ? [methods] : methods) {
      if (ROUTE_METHODS.includes(method)) this.#routes.push({ method, pattern });
    }
  }

  /** The methods some route answers at `path`, in ROUTE_METHODS order. */
  allowed(path: string): string[] {
    return ROUTE_METHODS.filter((method) => this.#routes.some((route) => route.method === method && route.pattern.test(path)));
  }
}

/** Every route fastify registered on a gateway app (HEAD included), for the test that /openapi.json covers them all. */
const REGISTERED_ROUTES = new WeakMap<FastifyInstance, Array<{ method: string; url: string }>>();

export function registeredRoutes(app: FastifyInstance): ReadonlyArray<{ method: string; url: string }> {
  return REGISTERED_ROUTES.get(app) ?? [];
}

/** Each app's switch into draining (readiness 503, keep-alive connections closed after their answer). */
const START_DRAINING = new WeakMap<FastifyInstance, () => void>();

/**
 * Puts the app into draining before its port closes: `/readyz` answers 503 and every answer
 * closes its connection, while requests are still served. fastify's own close does the same on
 * its way down; this lets a gateway stay in that state for its drain delay first.
 */
export function startDraining(app: FastifyInstance): void {
  START_DRAINING.get(app)?.();
}

export function buildGatewayApp(deps: GatewayDeps, settings: GatewaySettings): FastifyInstance {
  const metrics = new RequestMetrics(deps.metrics);
  // One short line per failure, never a stack: a caller sending bad requests must not be able to
  // fill the logs (a stack of an unknown-model error was 2.8 KB). Server-side failures at warn.
  const refuse = (error: unknown, request: FastifyRequest, reply: FastifyReply): FastifyReply => {
    const shoal = fromFastifyError(error, settings.bodyLimitBytes);
    metrics.failed(request, shoal.code);
    // Router refusals (frameworkErrors) skip the onRequest hooks that set it on every other answer.
    reply.header('x-request-id', request.id);
    const line = { code: shoal.code, reason: shoal.message.slice(0, 300), url: pathOf(request.url), status: shoal.traits.httpStatus, request_id: request.id };
    if (shoal.traits.httpStatus >= 500) deps.logger?.warn(line, 'request failed');
    else deps.logger?.info(line, 'request refused');
    return sendError(reply, shoal);
  };
  // Fastify's own request logging stays off: failures are logged by `refuse`, with their codes.
  const app = Fastify({
    bodyLimit: settings.bodyLimitBytes,
    routerOptions: { maxParamLength: MAX_PATH_PARAM_CHARS },
    logger: false,
    return503OnClosing: true,
    forceCloseConnections: 'idle',
    genReqId: (raw) => requestId(raw.headers['x-request-id']),
    // URLs the router cannot match (a bad %-escape, an over-long segment) answer in the error
    // shape of every other refusal, not fastify's own `{"error": "Bad Request", "code": "FST_…"}`.
    frameworkErrors: (error, request, reply) => {
      refuse(error, request, reply);
    },
  });
  // JSON only: a text/plain body would otherwise reach the schemas as a string.
  app.removeContentTypeParser('text/plain');
  const authFailures = authFailureCounter(deps.metrics);
  const auth = new BearerAuth({
    tokens: settings.apiTokens,
    protectMetrics: settings.protectMetrics,
    // Logged (never the token: only whether one was sent) and counted, so guessing shows up.
    onRefused: (reason, request) => {
      authFailures.inc({ reason });
      deps.logger?.warn({ reason, ip: request.ip, method: request.method, url: pathOf(request.url), request_id: request.id }, 'authentication failed');
    },
  });
  let closing = false;
  START_DRAINING.set(app, () => {
    closing = true;
  });
  const routes = new RoutePatterns();
  const registered: Array<{ method: string; url: string }> = [];
  REGISTERED_ROUTES.set(app, registered);
  app.addHook('onRoute', (route) => {
    routes.add(route.method, route.url);
    for (const method of typeof route.method === 'string' ? [route.method] : route.method) registered.push({ method, url: route.url });
  });

  // First, so every answer carries it, a 401 or a 404 included.
  app.addHook('onRequest', async (request, reply) => {
    reply.header('x-request-id', request.id);
  });
  registerCors(app, { origins: settings.corsOrigins });
  app.addHook('onRequest', async (request) => auth.check(request));
  app.addHook('preParsing', async (request) => checkBodyType(request));
  // A POST without a body (or a content type) reaches no schema as `undefined`: say what to send.
  app.addHook('preValidation', async (request) => {
    // A multipart upload (POST /v1/ingest) is read by its route, so its body is never parsed here.
    const upload = request.routeOptions.config.upload === true && /^multipart\/form-data\b/i.test(request.headers['content-type'] ?? '');
    if (request.method === 'POST' && request.body === undefined && request.routeOptions.url !== undefined && !upload) {
      throw new ShoalError(ErrorCode.INVALID_INPUT, 'the request body is empty: send a JSON object with Content-Type: application/json');
    }
  });
  app.addHook('preClose', async () => {
    closing = true;
  });
  // Responses finished during shutdown close their keep-alive connection, so close() need not wait for clients to hang up.
  app.addHook('onSend', async (_request, reply) => {
    if (closing) reply.header('connection', 'close');
  });
  metrics.register(app);

  app.setErrorHandler(async (error, request, reply) => refuse(error, request, reply));
  app.setNotFoundHandler(async (request, reply) => {
    const path = request.url.split('?', 1)[0] ?? '';
    // A route that exists under another method is 405 with Allow, as HTTP says, not "no route".
    const allowed = routes.allowed(path);
    if (allowed.length > 0) {
      reply.header('allow', allowed.join(', '));
      return sendError(reply, new ShoalError(ErrorCode.METHOD_NOT_ALLOWED, `${request.method} ${path}: use ${allowed.join(' or ')}`, { details: { method: request.method, allow: allowed } }));
    }
    return sendError(reply, new ShoalError(ErrorCode.NOT_FOUND, `no route ${request.method} ${path}`, { details: { method: request.method } }));
  });

  // Every route reaches the engine through admission control: overload answers 429 at once.
  const admission = new Admission(settings.admission ?? DEFAULT_ADMISSION);
  // Classification jobs use the engine without admission: they queue in ClassifyRuns and run at bulk priority.
  const classifyRuns = new ClassifyRuns({ engine: deps.engine, resultsDir: settings.classify?.resultsDir ?? null, cacheDir: settings.classify?.cacheDir ?? null, ...(deps.logger === undefined ? {} : { logger: deps.logger }) });
  app.addHook('onClose', async () => classifyRuns.close());
  const engine = admittedEngine(deps.engine, admission);
  // Every configured index parsed now (a bad URI stops the start), each store opened once and kept.
  const indexPool = new IndexPool(settings.indexes, settings.indexOptions);
  app.addHook('onClose', async () => indexPool.close());
  const context: RouteContext = {
    deps: { ...deps, engine },
    settings,
    names: natsNames(settings.natsPrefix),
    metrics,
    call: (reply) => callWithDeadline(reply, settings.requestTimeoutMs),
    classifyRuns,
    modelFacts: new ModelFactsCache(engine),
    indexOutages: new IndexOutages(),
    indexPool,
    closing: () => closing,
  };
  registerHealthRoutes(app, context);
  registerPrimitiveRoutes(app, context);
  registerJobRoutes(app, context);
  registerModelRoutes(app, context);
  registerOpenAiRoutes(app, context);
  registerTeiRoutes(app, context);
  registerTeiSparseRoutes(app, context);
  registerTeiTokenizeRoutes(app, context);
  registerTeiInfoRoutes(app, context);
  registerSearchRoutes(app, context);
  registerIngestRoutes(app, context);
  registerIndexRoutes(app, context);
  registerClassifyRoutes(app, context);
  registerApiDocsRoutes(app, context);
  registerConsoleRoutes(app, context);
  return app;
}
