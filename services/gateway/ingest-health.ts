import type { ShoalMetrics } from '../../adapters/observability/metrics.js';
import type { Logger } from '../../adapters/observability/logger.js';
import type { StoreHealth } from '../../pipelines/documents/store-health.js';

/**
 * The gateway's view of its ingest runs' stores: `shoal_sink_degraded{backend}` is 1 while any
 * run finds that backend failing and 0 once none does (several runs may write to one backend),
 * and each change is logged with the run id. The runs' statuses carry the mark themselves
 * (NatsIngest writes `degraded` into them); this is the fleet-level signal an alert watches.
 */
export class IngestStoreGauge {
  readonly #metrics: ShoalMetrics | undefined;
  readonly #logger: Logger | undefined;
  /** backend → runs finding it failing now. */
  readonly #failing = new Map<string, Set<string>>();

  constructor(metrics: ShoalMetrics | undefined, logger: Logger | undefined) {
    this.#metrics = metrics;
    this.#logger = logger;
  }

  /** Follows one run's health until the returned function is called (the run ended). */
  follow(runId: string, health: StoreHealth): () => void {
    const unwatch = health.onChange((store, degraded) => {
      const down = health.failingStores().includes(store);
      this.#set(store, runId, down);
      if (down) this.#logger?.warn({ run: runId, store, since: degraded?.since }, `ingest run degraded: ${degraded?.reason ?? store}`);
      else this.#logger?.info({ run: runId, store }, `ingest run: ${store} answers again`);
    });
    return () => {
      unwatch();
      for (const store of [...this.#failing.keys()]) this.#set(store, runId, false);
    };
  }

  #set(store: string, runId: string, down: boolean): void {
    // S3 sources are not read by gateway runs, and the gauge is about index backends.
    if (store === 's3') return;
    let runs = this.#failing.get(store);
    if (runs === undefined) {
      runs = new Set();
      this.#failing.set(store, runs);
    }
    if (down) runs.add(runId);
    else runs.delete(runId);
    this.#metrics?.sinkDegraded.set({ backend: store }, runs.size > 0 ? 1 : 0);
  }
}
