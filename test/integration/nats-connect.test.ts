import { describe, expect, it } from 'vitest';
import { connectNats } from '../../adapters/nats/connection/connection.js';
import { hasErrorCode } from '../../adapters/protocol/errors.js';
import { resolveWorkerConfig } from '../../services/worker/config.js';
import { runWorker } from '../../services/worker/main.js';
import { freePort, freePorts } from '../helpers/nats-server.js';
import { testWorkerConfig } from '../helpers/nats-worker.js';
import { ShoalMetrics } from '../../adapters/observability/metrics.js';
import { startGateway } from '../../services/gateway/main.js';
import { reliabilityGatewayConfig } from '../reliability/gateway-config.js';
import { capturingLogger } from '../helpers/capturing-logger.js';

/**
 * A service that cannot reach NATS says so: "connecting to ..." once, then each failed attempt
 * with its reason, and the first stop signal ends it at once instead of being ignored while the
 * connection is retried.
 */

describe('connecting to an unreachable NATS', () => {
  it('logs the target and each failed attempt with its reason, and stops on the signal', async () => {
    const port = await freePort();
    const logs = capturingLogger();
    const controller = new AbortController();
    const started = Date.now();
    const connecting = connectNats({ servers: [`nats://127.0.0.1:${port}`], reconnectWaitMs: 50, reconnectMaxWaitMs: 200 }, { logger: logs.logger, signal: controller.signal });
    connecting.catch(() => undefined);
    await new Promise((resolve) => setTimeout(resolve, 800));
    const abortedAt = Date.now();
    controller.abort();
    const failure = await connecting.catch((e: unknown) => e);
    expect(hasErrorCode(failure, 'CANCELLED')).toBe(true);
    expect(Date.now() - abortedAt).toBeLessThan(500);
    const lines = logs.lines();
    expect(lines[0]?.msg).toBe(`connecting to nats://127.0.0.1:${port} (attempt 1)`);
    const retries = lines.filter((line) => line.msg === 'NATS connection failed; retrying');
    expect(retries.length).toBeGreaterThanOrEqual(2);
    expect(retries[0]).toMatchObject({ attempt: 1, code: 'UNAVAILABLE', level: 40 });
    expect(String(retries[0]?.err)).toMatch(/ECONNREFUSED|refused|connect/i);
    expect(Date.now() - started).toBeLessThan(3_000);
  });

  it('a worker still connecting stops on the first signal, cleanly', async () => {
    const port = await freePort();
    const logs = capturingLogger();
    const controller = new AbortController();
    const config = resolveWorkerConfig(testWorkerConfig(`nats://127.0.0.1:${port}`, 'unreachable'));
    const running = runWorker(config, { signal: controller.signal, logger: logs.logger });
    running.catch(() => undefined);
    // Wait until it is in the connect loop (models checked, first attempt failed).
    for (let i = 0; i < 200 && !logs.lines().some((line) => line.msg === 'NATS connection failed; retrying'); i++) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect(logs.lines().some((line) => line.msg === 'NATS connection failed; retrying')).toBe(true);
    const abortedAt = Date.now();
    controller.abort();
    await expect(running).resolves.toBeUndefined();
    expect(Date.now() - abortedAt).toBeLessThan(2_000);
  }, 30_000);

  it('a gateway answers its probes while NATS is unreachable, and the first signal stops it', async () => {
    const [natsPort = 0, httpPort = 0] = await freePorts(2);
    const logs = capturingLogger();
    const controller = new AbortController();
    const config = reliabilityGatewayConfig(`nats://127.0.0.1:${natsPort}`, 'unreachable', { port: httpPort });
    const starting = startGateway({ config, logger: logs.logger, metrics: new ShoalMetrics({ processMetrics: false }), signal: controller.signal });
    starting.catch(() => undefined);
    const base = `http://127.0.0.1:${httpPort}`;
    let health: Response | null = null;
    for (let i = 0; i < 100 && health === null; i++) {
      health = await fetch(`${base}/healthz`).catch(() => null);
      if (health === null) await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect(health?.status).toBe(200);
    const ready = await fetch(`${base}/readyz`);
    expect(ready.status).toBe(503);
    expect(await ready.text()).toContain(`connecting to NATS at nats://127.0.0.1:${natsPort}`);
    const call = await fetch(`${base}/v1/encode`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'm', items: ['a'] }) });
    expect([call.status, call.headers.get('retry-after')]).toEqual([503, '5']);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(logs.lines().some((line) => line.msg === 'NATS connection failed; retrying')).toBe(true);
    const abortedAt = Date.now();
    controller.abort();
    const failure = await starting.catch((e: unknown) => e);
    expect(hasErrorCode(failure, 'CANCELLED')).toBe(true);
    expect(Date.now() - abortedAt).toBeLessThan(2_000);
    // The port is closed again.
    expect(await fetch(`${base}/healthz`).then(() => 'open', () => 'closed')).toBe('closed');
  }, 30_000);
});
