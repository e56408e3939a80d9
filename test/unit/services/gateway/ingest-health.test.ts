import { describe, expect, it } from 'vitest';
import { ShoalMetrics } from '../../../../adapters/observability/metrics.js';
import { StoreHealth } from '../../../../pipelines/documents/store-health.js';
import { IngestStoreGauge } from '../../../../services/gateway/ingest-health.js';

/**
 * shoal_sink_degraded for the gateway's ingest runs: 1 while any run finds a backend failing, 0
 * once none does (a run that recovers does not clear another's failure; a run that ends stops
 * counting), one series per backend.
 */

async function gauge(metrics: ShoalMetrics, backend: string): Promise<number | undefined> {
  const { values } = await metrics.sinkDegraded.get();
  return values.find((value) => value.labels.backend === backend)?.value;
}

describe('IngestStoreGauge', () => {
  it('is 1 while any run finds the backend failing and 0 once none does', async () => {
    const metrics = new ShoalMetrics({ processMetrics: false });
    const gauges = new IngestStoreGauge(metrics, undefined);
    const first = new StoreHealth();
    const second = new StoreHealth();
    gauges.follow('run-1', first);
    const endSecond = gauges.follow('run-2', second);

    first.failing('pgvector', 'Connection terminated');
    expect(await gauge(metrics, 'pgvector')).toBe(1);
    second.failing('pgvector', 'connect ECONNREFUSED');
    second.failing('chroma', 'HTTP 503');
    first.succeeded('pgvector');
    // run-2 still waits on pgvector.
    expect(await gauge(metrics, 'pgvector')).toBe(1);
    expect(await gauge(metrics, 'chroma')).toBe(1);
    endSecond();
    expect(await gauge(metrics, 'pgvector')).toBe(0);
    expect(await gauge(metrics, 'chroma')).toBe(0);
    // After its end a run's changes no longer count.
    second.succeeded('pgvector');
    second.failing('pgvector', 'again');
    expect(await gauge(metrics, 'pgvector')).toBe(0);
    // S3 sources are not an index backend: no series for them.
    first.failing('s3', 'ECONNREFUSED');
    expect(await gauge(metrics, 's3')).toBeUndefined();
  });
});
