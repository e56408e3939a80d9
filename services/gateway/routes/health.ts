import type { FastifyInstance } from 'fastify';
import { ErrorCode, ShoalError } from '../../../adapters/protocol/errors.js';
import type { RouteContext } from '../context.js';

/**
 * Probes and metrics. /healthz says the process serves HTTP (liveness: restart when it fails);
 * /readyz says requests can be served now (backends connected; false while shutting down), so a
 * load balancer stops sending before the gateway closes. /metrics is the Prometheus registry.
 */

export function registerHealthRoutes(app: FastifyInstance, context: RouteContext): void {
  app.get('/healthz', async () => ({ status: 'ok' }));

  app.get('/readyz', async () => {
    if (context.closing()) throw new ShoalError(ErrorCode.UNAVAILABLE, 'the gateway is shutting down');
    const report = await context.deps.ready();
    if (!report.ready) throw new ShoalError(ErrorCode.UNAVAILABLE, `not ready: ${report.reason ?? 'backends are not connected yet'}`);
    return { status: 'ready' };
  });

  app.get('/metrics', async (_request, reply) => {
    const { contentType, body } = await context.deps.metrics.render();
    return reply.type(contentType).send(body);
  });
}
