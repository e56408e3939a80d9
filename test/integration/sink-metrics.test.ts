import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JobsClient } from '../../adapters/nats/jobs/jobs-client.js';
import { openIndexUri } from '../../adapters/stores/open.js';
import type { ShoalWorker } from '../../services/worker/worker.js';
import { NATS_SERVER_MISSING, freePort, natsServerAvailable, startNatsServer, type NatsServerHandle } from '../helpers/nats-server.js';
import { TINY_MEAN, startTestWorker, testConnection, uniquePrefix } from '../helpers/nats-worker.js';
import { startShoal } from '../helpers/shoal-process.js';

/**
 * `shoal sink --metrics-port`: the real sink process serves /metrics, /healthz and /readyz on
 * loopback (the default host), and after a job's parts are committed into its index /metrics
 * shows shoal_sink_writes_total, shoal_sink_write_seconds and shoal_sink_degraded for that
 * backend; the port closes when the sink drains on SIGTERM.
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

describe.skipIf(!natsServerAvailable())(`shoal sink metrics port ${natsServerAvailable() ? '' : NATS_SERVER_MISSING}`, () => {
  let server: NatsServerHandle;
  let worker: ShoalWorker;
  let nc: NatsConnection;
  let jobs: JobsClient;
  const prefix = uniquePrefix('sinkmetrics');
  const root = mkdtempSync(join(tmpdir(), 'shoal-sink-metrics-'));
  const index = `lancedb://${join(root, 'idx')}?table=metered`;

  beforeAll(async () => {
    server = await startNatsServer();
    worker = await startTestWorker(server.url, prefix, { models: [TINY_MEAN] });
    nc = await testConnection(server.url);
    jobs = await JobsClient.open(nc, { topology: { prefix } });
  }, 60_000);

  afterAll(async () => {
    await worker?.drain();
    await nc?.close();
    await server?.stop();
    rmSync(root, { recursive: true, force: true });
  });

  it('answers /healthz, /readyz and /metrics on 127.0.0.1 with the sink metrics after a write, and closes on SIGTERM', async () => {
    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    const cli = startShoal(['sink', '--index', index, '--nats', server.url, '--prefix', prefix, '--metrics-port', String(port)], { env: { SHOAL_LOG_LEVEL: 'warn' } });
    try {
      await cli.waitFor(new RegExp(`shoal sink metrics on http://127\\.0\\.0\\.1:${port}/metrics`), 30_000);
      expect((await fetch(`${base}/healthz`)).status).toBe(200);
      expect((await fetch(`${base}/readyz`)).status).toBe(200);
      const missing = await fetch(`${base}/nope`);
      expect(missing.status).toBe(404);
      expect(await missing.text()).toMatch(/the sink serves \/metrics/);
      // Before any write: the store is not failing, and nothing was written.
      const before = await (await fetch(`${base}/metrics`)).text();
      expect(sample(before, 'shoal_sink_degraded', { backend: 'lancedb', service: 'sink' })).toBe(0);
      expect(sample(before, 'shoal_sink_writes_total', { backend: 'lancedb', outcome: 'ok' })).toBeNull();

      const items = Array.from({ length: 6 }, (_, i) => ({ id: `m-${i}`, text: `metered sentence ${i}` }));
      await jobs.submit({ job_id: 'metered', primitive: 'encode', request: { model: TINY_MEAN, items }, part_items: 2 });
      await jobs.wait('metered', { timeoutMs: 30_000 });
      // One commit per part, each counted once it returned.
      await expect.poll(async () => sample(await (await fetch(`${base}/metrics`)).text(), 'shoal_sink_writes_total', { backend: 'lancedb', outcome: 'ok' }), { timeout: 20_000, interval: 250 }).toBe(3);
      const after = await (await fetch(`${base}/metrics`)).text();
      expect(sample(after, 'shoal_sink_write_seconds_count', { backend: 'lancedb', service: 'sink' })).toBe(3);
      expect(sample(after, 'shoal_sink_write_seconds_sum', { backend: 'lancedb' })).toBeGreaterThan(0);
      expect(sample(after, 'shoal_sink_writes_total', { backend: 'lancedb', outcome: 'retry' })).toBeNull();
      expect(sample(after, 'shoal_sink_degraded', { backend: 'lancedb' })).toBe(0);
      // The counted writes are the rows in the index.
      const { store: sink } = openIndexUri(index);
      try {
        expect(await sink.count()).toBe(items.length);
      } finally {
        await sink.close();
      }
    } finally {
      const exit = await cli.stop('SIGTERM');
      expect(exit.code, cli.output()).toBe(0);
    }
    await expect(fetch(`${base}/healthz`)).rejects.toThrow();
  }, 90_000);
});
