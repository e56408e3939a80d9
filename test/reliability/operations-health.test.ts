import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { networkInterfaces, tmpdir } from 'node:os';
import { join } from 'node:path';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ShoalMetrics } from '../../adapters/observability/metrics.js';
import { JsonlStore } from '../../adapters/stores/file/store.js';
import { resolvePipeline } from '../../pipelines/documents/builtin.js';
import { NatsIngest } from '../../pipelines/documents/nats-ingest.js';
import type { PendingSource } from '../../pipelines/documents/sources.js';
import { StoreHealth } from '../../pipelines/documents/store-health.js';
import { parseWorkerConfig, workerConfigFromEnv } from '../../services/worker/config.js';
import { startMetricsServer } from '../../adapters/observability/metrics-server.js';
import { capturingLogger } from '../helpers/capturing-logger.js';
import { NATS_SERVER_MISSING, eventually, natsServerAvailable, startNatsServer, type NatsServerHandle } from '../helpers/nats-server.js';
import { testConnection, uniquePrefix } from '../helpers/nats-worker.js';

/**
 * Issue 42, item 16 (parts): the worker's metrics port bound 0.0.0.0 by default, without a word,
 * while the gateway and the sink default to loopback; and a failed ingest run kept the
 * `degraded` mark of a store that was failing when it ended, for good.
 */

/** An address of this machine other processes on the network reach (not loopback), if it has one. */
function externalAddress(): string | null {
  for (const entries of Object.values(networkInterfaces())) {
    for (const entry of entries ?? []) if (entry.family === 'IPv4' && !entry.internal) return entry.address;
  }
  return null;
}

describe('worker metrics port', () => {
  it('listens on loopback unless configured, so it is not reachable from other machines', async () => {
    const config = parseWorkerConfig({ ...workerConfigFromEnv({}), metricsPort: 0 });
    expect(config.metricsHost).toBe('127.0.0.1');
    const { logger, lines } = capturingLogger();
    const server = await startMetricsServer({ metrics: new ShoalMetrics(), host: config.metricsHost, port: 0, ready: () => true, logger });
    try {
      const url = new URL(server.url);
      expect(url.hostname).toBe('127.0.0.1');
      expect((await fetch(`${server.url}/healthz`)).status).toBe(200);
      const external = externalAddress();
      // Through another interface of this machine the port does not answer.
      if (external !== null) await expect(fetch(`http://${external}:${url.port}/healthz`, { signal: AbortSignal.timeout(5_000) })).rejects.toThrow();
      expect(lines().filter((line) => line.level === 40)).toEqual([]);
    } finally {
      await server.close();
    }
  });

  it('warns at start when bound to every interface (it has no authentication), as the gateway does', async () => {
    const { logger, lines } = capturingLogger();
    const server = await startMetricsServer({ metrics: new ShoalMetrics(), host: '0.0.0.0', port: 0, ready: () => true, logger });
    try {
      const warnings = lines().filter((line) => line.level === 40);
      expect(warnings).toHaveLength(1);
      expect(String(warnings[0]?.msg)).toMatch(/^SECURITY: the worker metrics port listens on 0\.0\.0\.0, reachable from other machines, WITHOUT authentication/);
      expect(warnings[0]).toMatchObject({ host: '0.0.0.0' });
    } finally {
      await server.close();
    }
  });
});

describe.skipIf(!natsServerAvailable())(`ingest run status after a failure${natsServerAvailable() ? '' : ` (${NATS_SERVER_MISSING})`}`, () => {
  let server: NatsServerHandle;
  let nc: NatsConnection;
  const dirs: string[] = [];

  beforeAll(async () => {
    server = await startNatsServer();
    nc = await testConnection(server.url);
  }, 60_000);
  afterAll(async () => {
    await nc?.close();
    await server?.stop();
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  it('a run that fails while a store is failing ends without the degraded mark (its error says why), and it stays so', async () => {
    // No parse worker: the run fails after 4 s with the watchdog's UNAVAILABLE.
    const ingest = await NatsIngest.open(nc, { prefix: uniquePrefix('stale'), parseWorkerTimeoutMs: 4_000, parseWarnAfterMs: 3_000 });
    const dir = mkdtempSync(join(tmpdir(), 'shoal-stale-'));
    dirs.push(dir);
    const health = new StoreHealth();
    const runId = randomUUID();
    const text = 'A note about tide tables.';
    const source: PendingSource = { uri: 'note-1', load: () => Promise.resolve({ source: { uri: 'note-1', id: 'note-1', text }, bytes: new TextEncoder().encode(text) }) };
    try {
      const running = ingest.run({ runId, definition: await resolvePipeline(undefined), sink: new JsonlStore({ dir }), index: dir, health }, [source]);
      const outcome = running.then(() => null, (error: unknown) => error);
      // The index fails while the run waits: the status shows it at once.
      await eventually(async () => expect((await ingest.status(runId))?.state).toBe('running'));
      health.failing('pgvector', 'connect ECONNREFUSED 127.0.0.1:5432');
      await eventually(async () => expect((await ingest.status(runId))?.degraded?.reason).toContain('pgvector unavailable'));
      expect(await outcome).toMatchObject({ code: 'UNAVAILABLE' });
      const ended = await ingest.status(runId);
      expect(ended?.state).toBe('failed');
      expect(ended?.error?.code).toBe('UNAVAILABLE');
      expect(ended?.degraded).toBeUndefined();
      // The store answering again after the run ended does not rewrite the ended run.
      health.succeeded('pgvector');
      health.failing('pgvector', 'down again');
      expect(await ingest.status(runId)).toEqual(ended);
    } finally {
      await ingest.close();
    }
  }, 30_000);
});
