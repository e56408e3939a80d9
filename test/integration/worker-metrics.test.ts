import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JobsClient } from '../../adapters/nats/jobs/jobs-client.js';
import { runWorker } from '../../services/worker/main.js';
import { resolveWorkerConfig } from '../../services/worker/config.js';
import type { ShoalWorker } from '../../services/worker/worker.js';
import { NATS_SERVER_MISSING, freePort, natsServerAvailable, startNatsServer, type NatsServerHandle } from '../helpers/nats-server.js';
import { TINY_MEAN, quietLogger, testConnection, testWorkerConfig, uniquePrefix } from '../helpers/nats-worker.js';

/**
 * A worker's own metrics port (workers take work from NATS, so Prometheus scrapes them there):
 * /readyz turns 200 once it takes work, /metrics counts the job parts it handled and the batches
 * and model loads behind them, and the port closes when the worker drains.
 */

/** The value of one series in Prometheus text, or null when absent. */
function sample(text: string, name: string, labels: Record<string, string>): number | null {
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`)) continue;
    const labelText = line.slice(name.length + 1, line.indexOf('}'));
    if (Object.entries(labels).every(([key, value]) => labelText.includes(`${key}="${value}"`))) return Number(line.slice(line.indexOf('}') + 1).trim());
  }
  return null;
}

describe.skipIf(!natsServerAvailable())(`worker metrics port ${natsServerAvailable() ? '' : NATS_SERVER_MISSING}`, () => {
  let server: NatsServerHandle;
  let nc: NatsConnection;
  let jobs: JobsClient;
  const prefix = uniquePrefix('metrics');

  beforeAll(async () => {
    server = await startNatsServer();
    nc = await testConnection(server.url);
    jobs = await JobsClient.open(nc, { topology: { prefix } });
  });

  afterAll(async () => {
    await nc?.close();
    await server?.stop();
  });

  it('serves /readyz, /metrics with job part outcomes and batches, and closes on drain', async () => {
    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    const stop = new AbortController();
    let worker: ShoalWorker | null = null;
    const config = resolveWorkerConfig(testWorkerConfig(server.url, prefix, { metricsPort: port, metricsHost: '127.0.0.1', workerId: 'metered' }));
    const running = runWorker(config, { signal: stop.signal, logger: quietLogger(), onReady: (w) => (worker = w) });
    try {
      await expect.poll(() => worker?.state, { timeout: 30_000 }).toBe('running');
      expect((await fetch(`${base}/healthz`)).status).toBe(200);
      expect((await fetch(`${base}/readyz`)).status).toBe(200);
      expect((await fetch(`${base}/nope`)).status).toBe(404);

      const items = Array.from({ length: 12 }, (_, i) => ({ id: i, text: `metered item ${i}` }));
      const submitted = await jobs.submit({ job_id: 'metered', primitive: 'encode', request: { model: TINY_MEAN, items }, part_items: 4 });
      expect(await jobs.wait(submitted.job_id, { timeoutMs: 30_000 })).toMatchObject({ state: 'completed', parts_done: 3 });

      // The job's status turns completed when the last part's result is published; the part is
      // counted a moment later, once its handler returns the ack, so the count is polled.
      const acked = async (): Promise<number | null> =>
        sample(await (await fetch(`${base}/metrics`)).text(), 'shoal_job_parts_total', { primitive: 'encode', model: TINY_MEAN, outcome: 'ack', worker: 'metered' });
      await expect.poll(acked, { timeout: 10_000 }).toBe(3);
      const response = await fetch(`${base}/metrics`);
      expect(response.status).toBe(200);
      expect(response.headers.get('content-type')).toMatch(/^text\/plain/);
      const text = await response.text();
      expect(sample(text, 'shoal_batch_items_total', { model: TINY_MEAN })).toBeGreaterThanOrEqual(12);
      expect(sample(text, 'shoal_model_loads_total', { model: TINY_MEAN })).toBe(1);
      expect(sample(text, 'shoal_pool_budget_bytes', { service: 'worker' })).toBe(2 * 1024 ** 3);
    } finally {
      stop.abort();
      await running;
    }
    await expect(fetch(`${base}/healthz`)).rejects.toThrow();
  });
});
