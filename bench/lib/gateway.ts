import type { FastifyInstance } from 'fastify';
import { ShoalMetrics } from '../../adapters/observability/metrics.js';
import type { InferenceEngine } from '../../pipelines/inference/engine.js';
import { buildGatewayApp } from '../../services/gateway/app.js';
import type { GatewaySettings } from '../../services/gateway/context.js';

/**
 * The gateway as the HTTP benches run it: in process over `engine`, no NATS, no auth, a 64 MiB body
 * limit, a 10-minute request timeout and admission wide enough that the bench measures the engine,
 * not 429s. `extra` adds what one bench needs (e.g. `classify`).
 */
export function benchGateway(engine: InferenceEngine, extra: Partial<GatewaySettings> = {}): FastifyInstance {
  return buildGatewayApp(
    { engine, jobs: null, models: async () => [], metrics: new ShoalMetrics({ processMetrics: false }), ready: async () => ({ ready: true }) },
    {
      apiTokens: [],
      protectMetrics: false,
      bodyLimitBytes: 64 * 1024 * 1024,
      requestTimeoutMs: 600_000,
      corsOrigins: [],
      embedModel: null,
      rerankModel: null,
      natsPrefix: 'bench',
      admission: { maxInFlightItemsPerModel: 100_000, maxQueueSeconds: 3600 },
      ...extra,
    },
  );
}
