import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from './logger.js';
import type { ShoalMetrics } from './metrics.js';
import { ErrorCode, ShoalError } from '../protocol/errors.js';
import { isLoopback } from './bind-address.js';

/**
 * The small HTTP side door for operations of the processes that serve no HTTP of their own
 * (`shoal worker`, `shoal sink`): `/metrics` (Prometheus text), `/healthz` (the process answers)
 * and `/readyz` (200 only while it takes work: not while it starts, e.g. preloading models, nor
 * while it drains). They take their work from NATS, so this is the only HTTP they serve; it is
 * off unless a port is configured.
 */

export interface MetricsServerOptions {
  metrics: ShoalMetrics;
  host: string;
  /** 0 picks a free port (tests). */
  port: number;
  ready: () => boolean;
  /** Named in the answer to an unknown path. @default 'worker' */
  service?: string;
  /** Told, at `warn`, when the port is reachable from other machines (it has no authentication). */
  logger?: Logger;
}

export interface MetricsServer {
  readonly url: string;
  close(): Promise<void>;
}

export async function startMetricsServer(options: MetricsServerOptions): Promise<MetricsServer> {
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { allow: 'GET, HEAD' }).end();
      return;
    }
    if (path === '/metrics') {
      options.metrics
        .render()
        .then(({ contentType, body }) => res.writeHead(200, { 'content-type': contentType }).end(body))
        .catch((error: unknown) => res.writeHead(500, { 'content-type': 'text/plain' }).end(String(error)));
      return;
    }
    if (path === '/healthz') {
      res.writeHead(200, { 'content-type': 'text/plain' }).end('ok\n');
      return;
    }
    if (path === '/readyz') {
      const ready = options.ready();
      res.writeHead(ready ? 200 : 503, { 'content-type': 'text/plain' }).end(ready ? 'ready\n' : 'not ready\n');
      return;
    }
    res.writeHead(404, { 'content-type': 'text/plain' }).end(`not found: the ${options.service ?? 'worker'} serves /metrics, /healthz and /readyz\n`);
  });
  await new Promise<void>((resolve, reject) => {
    // "address already in use" alone does not say which setting chose the port.
    server.once('error', (error) =>
      reject(
        new ShoalError(ErrorCode.UNAVAILABLE, `cannot listen on ${options.host}:${options.port} for /metrics (choose another with --metrics-port / SHOAL_METRICS_PORT): ${error.message}`, {
          cause: error,
        }),
      ),
    );
    server.listen(options.port, options.host, () => {
      server.removeAllListeners('error');
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  if (!isLoopback(options.host)) {
    // As the gateway does for its own port: said once at start, so an exposure is never silent.
    options.logger?.warn(
      { host: options.host, port: address.port },
      `SECURITY: the ${options.service ?? 'worker'} metrics port listens on ${options.host}, reachable from other machines, WITHOUT authentication: /metrics shows model names, queue sizes and store names to anyone who can reach it. Bind it to 127.0.0.1 (SHOAL_METRICS_HOST, --metrics-host) unless a scraper on another host needs it, and then keep the port inside a private network (docs/security.md)`,
    );
  }
  return {
    url: `http://${host}:${address.port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
