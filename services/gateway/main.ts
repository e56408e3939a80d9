import { setTimeout as delay } from 'node:timers/promises';
import type { NatsConnection } from '@nats-io/transport-node';
import type { FastifyInstance } from 'fastify';
import { connectNats, redacted } from '../../adapters/nats/connection/connection.js';
import { DISCOVERY_STALL_MS, NatsEngine } from '../../adapters/nats/rpc/engine-client.js';
import { JobBacklog, registerBacklogMetrics } from '../../adapters/nats/jobs/backlog.js';
import { JobsClient } from '../../adapters/nats/jobs/jobs-client.js';
import { S3Store } from '../../adapters/object-store/index.js';
import { servedModelGate } from '../../adapters/nats/jobs/model-gate.js';
import { createLogger, type Logger } from '../../adapters/observability/logger.js';
import { ShoalMetrics } from '../../adapters/observability/metrics.js';
import { ErrorCode, ShoalError, toShoalError } from '../../adapters/protocol/errors.js';
import { buildGatewayApp, startDraining } from './app.js';
import type { ModelCard, ReadyReport } from './context.js';
import type { GatewayConfig } from './config.js';
import { ClassifyJobRuns } from './classify-jobs.js';
import { IngestRuns } from './ingest-runs.js';
import { LateBackend } from './late-backend.js';
import { cachedModelList } from './worker-models.js';
import type { Lifecycle } from '../../adapters/protocol/lifecycle.js';
import { isLoopback } from '../../adapters/observability/bind-address.js';

/**
 * Composition root of the gateway: configuration → HTTP app → listen (probes answer from here on)
 * → NATS connection → engine client (request-reply) and jobs client (JetStream), attached to the
 * app once connected. close() is the SIGTERM path: readiness turns
 * false and the listener stops accepting, in-flight requests finish (up to the shutdown timeout,
 * then their connections are cut), then the clients and the connection are closed.
 */

/** How long a readiness probe waits for the NATS server's answer. */
const READY_PING_MS = 2_000;

export interface StartGatewayOptions {
  config: GatewayConfig;
  logger?: Logger;
  metrics?: ShoalMetrics;
  /** Use this connection (shoal dev shares one); it stays the caller's and is not closed here. */
  nc?: NatsConnection;
  /** Stops start-up while NATS is still being retried (SIGTERM, Ctrl-C): rejects with CANCELLED. */
  signal?: AbortSignal;
  /** List models another way than asking the workers (shoal dev knows its models' families). */
  models?: () => Promise<readonly ModelCard[]>;
}

/** drain() and close() are one step for the gateway: stop accepting, let in-flight requests finish within the shutdown timeout, close what it opened; idempotent. */
export interface GatewayHandle extends Lifecycle {
  /** `http://host:port` it listens on (for a wildcard bind, the address fastify reports first: usable from this machine). */
  url: string;
  app: FastifyInstance;
}

/** A NATS round trip: the server answers while the connection is up. */
async function natsReady(nc: NatsConnection): Promise<ReadyReport> {
  if (nc.isClosed()) return { ready: false, reason: 'the NATS connection is closed' };
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<ReadyReport>((resolve) => {
    timer = setTimeout(() => resolve({ ready: false, reason: `NATS did not answer within ${READY_PING_MS} ms` }), READY_PING_MS);
  });
  try {
    return await Promise.race([nc.flush().then((): ReadyReport => ({ ready: true })), late]);
  } catch (error) {
    return { ready: false, reason: `NATS: ${toShoalError(error).message}` };
  } finally {
    clearTimeout(timer);
  }
}

async function closeHttp(app: FastifyInstance, timeoutMs: number, logger: Logger): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<'late'>((resolve) => {
    timer = setTimeout(() => resolve('late'), timeoutMs);
  });
  const outcome = await Promise.race([app.close().then(() => 'done' as const), deadline]);
  clearTimeout(timer);
  if (outcome === 'late') {
    logger.warn({ timeoutMs }, 'requests still running at the shutdown deadline; closing their connections');
    app.server.closeAllConnections();
    await app.close();
  }
}

export { isLoopback };

/**
 * Where the gateway listens, for people: a wildcard bind (0.0.0.0, ::) accepts connections on
 * every interface, while fastify's URL names only one of them (often 127.0.0.1), which reads as
 * if the gateway were local only.
 */
export function listeningLine(url: string, host: string): string {
  const h = host.trim().replace(/^\[|\]$/g, '');
  if (h !== '0.0.0.0' && h !== '::') return url;
  return `${h.includes(':') ? `[${h}]` : h}:${new URL(url).port}, every interface (${url} from this machine)`;
}

export async function startGateway(options: StartGatewayOptions): Promise<GatewayHandle> {
  const { config } = options;
  const logger = options.logger ?? createLogger('gateway');
  const metrics = options.metrics ?? new ShoalMetrics({ defaultLabels: { service: 'gateway' } });
  const ownsConnection = options.nc === undefined;
  // Shown in logs and in the open /readyz answer: credentials in the URLs never (uri-credentials.ts).
  const servers = redacted(config.nats.servers);
  // The port opens before NATS is reached: probes answer (readiness says why not) while it connects.
  const late = new LateBackend(servers);
  // One S3 store, so one allow-list (SHOAL_S3_BUCKETS) decides a bucket for jobs and ingest runs alike.
  const s3 = new S3Store(config.jobs?.s3 ?? {});
  const ingest = new IngestRuns({ connection: () => late.require().nc, prefix: config.natsPrefix, ...(config.streamReplicas === undefined ? {} : { replicas: config.streamReplicas }), fileRoots: config.jobs?.fileRoots ?? [], s3, ...(config.indexOptions === undefined ? {} : { indexOptions: config.indexOptions }), ...(config.parseWorkerTimeoutMs === undefined ? {} : { parseWorkerTimeoutMs: config.parseWorkerTimeoutMs }), ...(config.runHeartbeatMs === undefined ? {} : { runHeartbeatMs: config.runHeartbeatMs }), logger, metrics });
  // Classification jobs of the classify workers, read by id on every replica (SHOAL_CLASSIFY_JOBS).
  const classifyJobs = config.classifyJobs === true ? new ClassifyJobRuns({ connection: () => late.require().nc, prefix: config.natsPrefix, ...(config.streamReplicas === undefined ? {} : { replicas: config.streamReplicas }), fileRoots: config.jobs?.fileRoots ?? [], s3 }) : null;
  const app = buildGatewayApp(
    {
      engine: late.engine,
      jobs: late.jobs,
      // Before the connection the list fails (503, not cached), so it is not an empty list for the cache's lifetime.
      models: options.models ?? cachedModelList(async () => late.require().engine.workers()),
      metrics,
      ready: async () => (late.attached === null ? late.notConnected() : natsReady(late.attached.nc)),
      ingest,
      classifyJobs,
      logger,
    },
    config,
  );
  let url: string;
  try {
    url = await app.listen({ host: config.host, port: config.port });
  } catch (error) {
    throw new ShoalError(ErrorCode.UNAVAILABLE, `cannot listen on ${config.host}:${config.port} (choose another with --port): ${toShoalError(error).message}`, { cause: error });
  }
  logger.info({ url, auth: config.apiTokens.length > 0, nats: servers }, 'gateway listening');
  if (config.apiTokens.length === 0 && !isLoopback(config.host)) {
    logger.warn(
      { host: config.host, url },
      `SECURITY: the gateway listens on ${config.host}, reachable from other machines, WITHOUT authentication: anyone who can reach it can run inference and submit jobs. Set SHOAL_API_TOKENS (or --api-tokens-file), or bind to 127.0.0.1 (docs/security.md)`,
    );
  }

  let nc: NatsConnection | null = options.nc ?? null;
  let engine: NatsEngine | null = null;
  try {
    nc ??= await connectNats(config.nats, {
      logger,
      name: 'shoal-gateway',
      onAttemptFailed: (failure, attempt) => late.attemptFailed(failure, attempt),
      ...(options.signal === undefined ? {} : { signal: options.signal }),
    });
    const connection = nc;
    // Both waits are the gateway's own request timeout: a large call to a model a worker already
    // holds may run long (600 long texts: ~10 s on 2 cores), and a fixed shorter wait answered 504
    // before the gateway's deadline, with a Retry-After that invited the same failure again.
    const client = new NatsEngine(connection, { prefix: config.natsPrefix, timeoutMs: config.requestTimeoutMs, loadTimeoutMs: config.requestTimeoutMs });
    engine = client;
    let jobs: JobsClient;
    try {
      // Jobs only for models some worker serves (or served): made-up names are refused with 404.
      // Index result targets may name the indexes this gateway serves (the results sink is given the same ones).
      jobs = await JobsClient.open(connection, { topology: { prefix: config.natsPrefix, ...(config.streamReplicas === undefined ? {} : { replicas: config.streamReplicas }) }, ...config.jobs, s3Store: s3, indexNames: Object.keys(config.indexes ?? {}), modelGate: (topology) => servedModelGate({ topology, discover: () => client.workers(500, DISCOVERY_STALL_MS) }) });
    } catch (error) {
      const shoal = toShoalError(error);
      throw new ShoalError(shoal.code, `cannot set up jobs on NATS JetStream (is JetStream enabled on the server?): ${shoal.message}`, { cause: error });
    }
    registerBacklogMetrics(metrics, JobBacklog.of(connection, jobs.topology)); // shoal_backlog_{parts,items,tokens}: the scale-from-zero signal
    late.attach({ nc: connection, engine: client, jobs });
  } catch (error) {
    await app.close();
    await engine?.close();
    s3.close();
    if (ownsConnection) await nc?.close();
    throw error;
  }
  const connection = nc;
  const connected = engine;

  let closing: Promise<void> | null = null;
  const close = (): Promise<void> => {
    closing ??= (async () => {
      logger.info({ drain_delay_ms: config.drainDelayMs }, 'gateway draining');
      try {
        // Still serving, readiness 503: a load balancer takes the replica out before its port closes
        // (Kubernetes removes endpoints while the pod is already terminating).
        startDraining(app);
        if (config.drainDelayMs > 0) await delay(config.drainDelayMs);
        await closeHttp(app, config.shutdownTimeoutMs, logger);
      } finally {
        await ingest.close().catch((error: unknown) => logger.warn({ err: String(error) }, 'stopping ingest runs failed'));
        await classifyJobs?.close();
        await connected.close();
        s3.close();
        if (ownsConnection) await connection.drain().catch(() => connection.close());
      }
      logger.info('gateway stopped');
    })();
    return closing;
  };
  return { url, app, drain: close, close };
}
