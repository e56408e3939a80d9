import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ShoalMetrics } from '../../../../adapters/observability/metrics.js';
import { InferenceEngine } from '../../../../pipelines/inference/engine.js';
import { poolMetrics, schedulerMetrics } from '../../../../pipelines/inference/telemetry.js';
import { FIXTURES_DIR } from '../../../helpers/shared.js';

/** Metrics wired to a real engine: loads, batches, tokens and evictions show up in the exposition. */

const metrics = new ShoalMetrics({ processMetrics: false, defaultLabels: { service: 'test' } });
const engine: InferenceEngine = new InferenceEngine({
  memoryBudget: '200MB',
  hooks: { pool: poolMetrics(metrics), scheduler: schedulerMetrics(metrics, () => engine.scheduler.queuedByLane) },
});
afterAll(async () => {
  await engine.close();
});

function value(text: string, series: string): number {
  const line = text.split('\n').find((l) => l.startsWith(series));
  return line === undefined ? Number.NaN : Number(line.slice(line.lastIndexOf(' ') + 1));
}

describe('Prometheus metrics', () => {
  it('reports loads, batches, tokens, resident bytes and evictions of real requests', async () => {
    const model = join(FIXTURES_DIR, 'models', 'tiny-bert-mean');
    await engine.encode({ model, items: ['hello the', 'the hello hello'], priority: 'bulk' });
    await engine.unload(model);
    const { body, contentType } = await metrics.render();
    expect(contentType).toContain('text/plain');
    expect(value(body, `shoal_model_loads_total{model="${model}",family="dense",service="test"}`)).toBe(1);
    expect(value(body, `shoal_batches_total{model="${model}",lane="bulk",service="test"}`)).toBe(1);
    const real = value(body, `shoal_batch_tokens_total{model="${model}",lane="bulk",kind="real",service="test"}`);
    const padded = value(body, `shoal_batch_tokens_total{model="${model}",lane="bulk",kind="padded",service="test"}`);
    expect(real).toBeGreaterThan(0);
    expect(padded).toBeGreaterThanOrEqual(real);
    expect(value(body, 'shoal_pool_budget_bytes{service="test"}')).toBe(200_000_000);
    expect(value(body, 'shoal_model_evictions_total{reason="explicit",service="test"}')).toBe(1);
    expect(value(body, 'shoal_pool_resident_bytes{service="test"}')).toBe(0);
    expect(body).not.toContain(`shoal_model_resident_bytes{model="${model}"`);
  });
});
