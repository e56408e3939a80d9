import type { NatsConnection } from '@nats-io/transport-node';
import type { FastifyInstance } from 'fastify';
import { connectNats } from '../../adapters/nats/connection.js';
import { NatsEngine } from '../../adapters/nats/engine-client.js';
import { JobsClient } from '../../adapters/nats/jobs-client.js';
import { createLogger, type Logger } from '../../adapters/observability/logger.js';
import { ShoalMetrics } from '../../adapters/observability/metrics.js';
import { ErrorCode, ShoalError, toShoalError } from '../../adapters/protocol/errors.js';
import { buildGatewayApp, type ModelCard, type ReadyReport } from './app.js';
import type { GatewayConfig } from './config.js';
import { cachedModelList } from './worker-models.js';

/**
 * Composition root of the gateway: configuration → NATS connection → engine client (request-reply)
 * and jobs client (JetStream) → HTTP app → listen. close() is the SIGTERM path: readiness turns
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
  /** List models another way than asking the workers (shoal dev knows its models' families). */
  models?: () => Promise<readonly ModelCard[]>;
}

export interface GatewayHandle {
  /** `http://host:port` it listens on. */
  url: string;
  app: FastifyInstance;
  /** Drains and stops everything this gateway opened; idempotent. */
  close(): Promise<void>;
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

export async function startGateway(options: StartGatewayOptions): Promise<GatewayHandle> {
  const { config } = options;
  const logger = options.logger ?? createLogger('gateway');
  const metrics = options.metrics ?? new ShoalMetrics({ defaultLabels: { service: 'gateway' } });
  const ownsConnection = options.nc === undefined;
  const nc = options.nc ?? (await connectNats(config.nats, { logger, name: 'shoal-gateway' }));
  const engine = new NatsEngine(nc, { prefix: config.natsPrefix, loadTimeoutMs: config.requestTimeoutMs });
  let jobs: JobsClient;
  try {
    jobs = await JobsClient.open(nc, { topology: { prefix: config.natsPrefix } });
  } catch (error) {
    if (ownsConnection) await nc.close();
    const shoal = toShoalError(error);
    throw new ShoalError(shoal.code, `cannot set up jobs on NATS JetStream (is JetStream enabled on the server?): ${shoal.message}`, { cause: error });
  }
  const app = buildGatewayApp(
    {
      engine,
      jobs,
      models: options.models ?? cachedModelList(() => engine.workers()),
      metrics,
      ready: () => natsReady(nc),
      logger,
    },
    config,
  );
  let url: string;
  try {
    url = await app.listen({ host: config.host, port: config.port });
  } catch (error) {
    await engine.close();
    if (ownsConnection) await nc.close();
    throw new ShoalError(ErrorCode.UNAVAILABLE, `cannot listen on ${config.host}:${config.port}: ${toShoalError(error).message}`, { cause: error });
  }
  logger.info({ url, auth: config.apiTokens.length > 0, nats: nc.getServer() }, 'gateway listening');

  let closing: Promise<void> | null = null;
  const close = (): Promise<void> => {
    closing ??= (async () => {
      logger.info('gateway draining');
      try {
        await closeHttp(app, config.shutdownTimeoutMs, logger);
      } finally {
        await engine.close();
        if (ownsConnection) await nc.drain().catch(() => nc.close());
      }
      logger.info('gateway stopped');
    })();
    return closing;
  };
  return { url, app, close };
}
