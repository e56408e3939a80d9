import { resolveNatsSettings } from '../../adapters/nats/connection/connection.js';
import type { GatewayConfig } from '../../services/gateway/config.js';

/**
 * A gateway configuration for the reliability tests, built as the validated object startGateway
 * takes (loopback, a free port, no tokens) so the tests depend on the gateway's behaviour, not on
 * how flags and variables are read.
 */
export function reliabilityGatewayConfig(natsUrl: string, prefix: string, overrides: Partial<GatewayConfig> = {}): GatewayConfig {
  return {
    host: '127.0.0.1',
    port: 0,
    shutdownTimeoutMs: 5_000,
    drainDelayMs: 0,
    nats: resolveNatsSettings({ servers: [natsUrl], reconnectWaitMs: 50, reconnectMaxWaitMs: 500 }),
    apiTokens: [],
    protectMetrics: false,
    bodyLimitBytes: 8 * 1024 * 1024,
    requestTimeoutMs: 30_000,
    corsOrigins: [],
    embedModel: null,
    rerankModel: null,
    natsPrefix: prefix,
    ...overrides,
  };
}
