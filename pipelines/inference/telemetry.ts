import type { Priority } from '../../adapters/protocol/requests.js';
import type { ShoalMetrics } from '../../adapters/observability/metrics.js';
import type { PoolHooks, PoolSnapshot } from './pool-options.js';
import type { SchedulerHooks } from './scheduler-options.js';

/**
 * Connects the pool's and the scheduler's hooks to Prometheus metrics. Services pass the result as
 * the engine's `hooks`, adding their own handlers where they need them (logs).
 */

export function poolMetrics(metrics: ShoalMetrics): PoolHooks {
  let knownModels = new Set<string>();
  return {
    onLoad: (event) => {
      metrics.modelLoads.inc({ model: event.name, family: event.family });
      metrics.modelLoadSeconds.observe({ family: event.family }, event.seconds);
    },
    onLoadError: (event) => metrics.modelLoadFailures.inc({ model: event.name, code: event.error.code }),
    onEvict: (event) => metrics.modelEvictions.inc({ reason: event.reason }),
    onChange: (snapshot: PoolSnapshot) => {
      metrics.poolBudgetBytes.set(snapshot.budgetBytes);
      metrics.poolResidentBytes.set(snapshot.residentBytes);
      metrics.poolPinnedModels.set(snapshot.pinnedCount);
      const current = new Set<string>();
      for (const model of snapshot.models) {
        current.add(model.name);
        metrics.modelResidentBytes.set({ model: model.name }, model.chargedBytes);
      }
      // Evicted models leave the gauge instead of reporting stale bytes.
      for (const name of knownModels) if (!current.has(name)) metrics.modelResidentBytes.remove({ model: name });
      knownModels = current;
    },
  };
}

export function schedulerMetrics(metrics: ShoalMetrics, queued: () => Readonly<Record<Priority, number>>): SchedulerHooks {
  return {
    onBatch: (event) => {
      const labels = { model: event.model, lane: event.lane };
      metrics.batches.inc(labels);
      metrics.batchItems.inc(labels, event.items);
      metrics.batchTokens.inc({ ...labels, kind: 'real' }, event.realTokens);
      metrics.batchTokens.inc({ ...labels, kind: 'padded' }, event.paddedTokens);
      metrics.batchSeconds.observe(labels, event.runMs / 1000);
      metrics.queueWaitSeconds.observe({ lane: event.lane }, event.queueMs / 1000);
      if (event.error !== undefined) metrics.batchFailures.inc({ model: event.model, code: event.error.code });
      for (const [lane, items] of Object.entries(queued())) metrics.queuedItems.set({ lane }, items);
    },
  };
}
