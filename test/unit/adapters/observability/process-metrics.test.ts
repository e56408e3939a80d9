import { describe, expect, it } from 'vitest';
import { ShoalMetrics } from '../../../../adapters/observability/metrics.js';

describe('process metrics', () => {
  it("are prom-client's process and Node.js metrics under shoal_, each word said once", async () => {
    const { body } = await new ShoalMetrics().render();
    const names = new Set([...body.matchAll(/^# TYPE (\S+)/gm)].map((match) => match[1]));
    for (const name of ['shoal_process_cpu_seconds_total', 'shoal_process_resident_memory_bytes', 'shoal_nodejs_eventloop_lag_seconds', 'shoal_nodejs_heap_size_used_bytes']) expect(names).toContain(name);
    expect(body).not.toContain('shoal_process_process_');
    expect(body).not.toContain('shoal_process_nodejs_');
  });

  it('are left out when asked (tests, embedded use)', async () => {
    const { body } = await new ShoalMetrics({ processMetrics: false }).render();
    expect(body).not.toContain('shoal_process_cpu_seconds_total');
  });
});
