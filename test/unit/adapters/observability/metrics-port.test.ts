import { createServer } from 'node:net';
import { describe, expect, it } from 'vitest';
import { ShoalMetrics } from '../../../../adapters/observability/metrics.js';
import { ErrorCode } from '../../../../adapters/protocol/errors.js';
import { startMetricsServer } from '../../../../adapters/observability/metrics-server.js';

/** A worker whose metrics port is taken says which setting chose it (issue 16: "port in use" names the flag). */
describe('worker metrics port', () => {
  it('a port in use is UNAVAILABLE naming --metrics-port and SHOAL_METRICS_PORT', async () => {
    const blocker = createServer();
    await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
    const address = blocker.address();
    const port = typeof address === 'object' && address !== null ? address.port : 0;
    try {
      await expect(startMetricsServer({ metrics: new ShoalMetrics({ processMetrics: false }), host: '127.0.0.1', port, ready: () => true })).rejects.toMatchObject({
        code: ErrorCode.UNAVAILABLE,
        message: expect.stringMatching(new RegExp(`^cannot listen on 127\\.0\\.0\\.1:${port} for /metrics \\(choose another with --metrics-port / SHOAL_METRICS_PORT\\): .*EADDRINUSE`)),
      });
    } finally {
      blocker.close();
    }
  });

  it('a free port still serves', async () => {
    const server = await startMetricsServer({ metrics: new ShoalMetrics({ processMetrics: false }), host: '127.0.0.1', port: 0, ready: () => true });
    try {
      expect((await fetch(`${server.url}/healthz`)).status).toBe(200);
    } finally {
      await server.close();
    }
  });
});
