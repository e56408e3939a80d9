import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { StoreWriteObserver } from '../stores/shared/delivery.js';

/**
 * Shoal's Prometheus metrics (prom-client). Every name starts with `shoal_`; labels are bounded
 * (model names come from configuration, lanes and reasons are enums). One instance per process,
 * on its own registry so tests and embedders never collide with the global one.
 */

const LOAD_BUCKETS = [0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120];
const BATCH_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5];
const REQUEST_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

export interface ShoalMetricsOptions {
  /** Also export Node.js process metrics (CPU, RSS, event loop lag, GC). @default true */
  processMetrics?: boolean;
  /** Extra labels on every series, e.g. {service: 'worker'}. */
  defaultLabels?: Record<string, string>;
}

export class ShoalMetrics {
  readonly registry = new Registry();

  readonly poolBudgetBytes = new Gauge({ name: 'shoal_pool_budget_bytes', help: 'Memory budget for resident models', registers: [this.registry] });
  readonly poolResidentBytes = new Gauge({ name: 'shoal_pool_resident_bytes', help: 'Bytes charged for resident and loading models', registers: [this.registry] });
  readonly poolPinnedModels = new Gauge({ name: 'shoal_pool_pinned_models', help: 'Models pinned in memory', registers: [this.registry] });
  readonly modelResidentBytes = new Gauge({
    name: 'shoal_model_resident_bytes',
    help: 'Bytes charged per resident model',
    labelNames: ['model'] as const,
    registers: [this.registry],
  });
  readonly modelLoads = new Counter({ name: 'shoal_model_loads_total', help: 'Model loads', labelNames: ['model', 'family'] as const, registers: [this.registry] });
  readonly modelLoadFailures = new Counter({
    name: 'shoal_model_load_failures_total',
    help: 'Failed model loads by error code',
    labelNames: ['model', 'code'] as const,
    registers: [this.registry],
  });
  readonly modelLoadSeconds = new Histogram({
    name: 'shoal_model_load_seconds',
    help: 'Time to load a model (session creation, measured in the pool)',
    labelNames: ['family'] as const,
    buckets: LOAD_BUCKETS,
    registers: [this.registry],
  });
  readonly modelEvictions = new Counter({
    name: 'shoal_model_evictions_total',
    help: 'Models unloaded, by reason (capacity, idle, explicit, shutdown)',
    labelNames: ['reason'] as const,
    registers: [this.registry],
  });
  readonly batches = new Counter({ name: 'shoal_batches_total', help: 'Batches run', labelNames: ['model', 'lane'] as const, registers: [this.registry] });
  readonly batchItems = new Counter({ name: 'shoal_batch_items_total', help: 'Items run in batches', labelNames: ['model', 'lane'] as const, registers: [this.registry] });
  readonly batchTokens = new Counter({
    name: 'shoal_batch_tokens_total',
    help: 'Tokens run in batches: real, and padded (real + padding)',
    labelNames: ['model', 'lane', 'kind'] as const,
    registers: [this.registry],
  });
  readonly batchSeconds = new Histogram({
    name: 'shoal_batch_seconds',
    help: 'Time a batch spent in its model thread',
    labelNames: ['model', 'lane'] as const,
    buckets: BATCH_BUCKETS,
    registers: [this.registry],
  });
  readonly batchFailures = new Counter({
    name: 'shoal_batch_failures_total',
    help: 'Batches that failed',
    labelNames: ['model', 'code'] as const,
    registers: [this.registry],
  });
  readonly queueWaitSeconds = new Histogram({
    name: 'shoal_queue_wait_seconds',
    help: 'Longest time an item of a batch waited in the scheduler queue',
    labelNames: ['lane'] as const,
    buckets: BATCH_BUCKETS,
    registers: [this.registry],
  });
  readonly jobParts = new Counter({
    name: 'shoal_job_parts_total',
    help: 'Job part deliveries handled by a worker, by outcome (ack: done, nak: retried later, term: failed for good, dead: dead-lettered, requeue: handed back at shutdown without using a delivery)',
    labelNames: ['primitive', 'model', 'outcome'] as const,
    registers: [this.registry],
  });
  readonly documentsEnded = new Counter({
    name: 'shoal_documents_total',
    help: 'Document jobs a documents worker ended, by terminal state (committed, unchanged, failed); repeats answered from the ledger are not counted',
    labelNames: ['state'] as const,
    registers: [this.registry],
  });
  readonly documentBatchesStalled = new Counter({
    name: 'shoal_document_batches_stalled_total',
    help: 'Batches of document jobs a documents worker gave up after no progress for SHOAL_DOCUMENTS_STALL_MS (their jobs handed back for another delivery)',
    registers: [this.registry],
  });
  readonly classifyChunks = new Counter({
    name: 'shoal_classify_chunks_total',
    help: 'Classification-job messages a classify worker handled, by outcome (counted: classified and counted, repeat: done before, failed: its run failed, retry: handed back)',
    labelNames: ['outcome'] as const,
    registers: [this.registry],
  });
  readonly classifyCategoryMatrices = new Counter({
    name: 'shoal_classify_category_matrices_total',
    help: 'Category matrices a classify worker opened, by where they came from (built: embedded here and stored, store: the object store, cache: the local cache folder)',
    labelNames: ['source'] as const,
    registers: [this.registry],
  });
  readonly queuedItems = new Gauge({ name: 'shoal_queue_items', help: 'Items waiting in the scheduler, per lane', labelNames: ['lane'] as const, registers: [this.registry] });
  readonly requests = new Counter({
    name: 'shoal_requests_total',
    help: 'Requests by primitive, model and outcome code (OK or an error code)',
    labelNames: ['primitive', 'model', 'code'] as const,
    registers: [this.registry],
  });
  readonly requestSeconds = new Histogram({
    name: 'shoal_request_seconds',
    help: 'End-to-end request time by primitive and lane',
    labelNames: ['primitive', 'lane'] as const,
    buckets: REQUEST_BUCKETS,
    registers: [this.registry],
  });

  readonly sinkWrites = new Counter({
    name: 'shoal_sink_writes_total',
    help: 'Index writes (commits of finished documents) by backend and outcome (ok, retry: a transient failure retried, failed: given up)',
    labelNames: ['backend', 'outcome'] as const,
    registers: [this.registry],
  });
  readonly sinkWriteSeconds = new Histogram({
    name: 'shoal_sink_write_seconds',
    help: 'Time of an index write, retries included',
    labelNames: ['backend'] as const,
    buckets: REQUEST_BUCKETS,
    registers: [this.registry],
  });

  readonly sinkDegraded = new Gauge({
    name: 'shoal_sink_degraded',
    help: 'Whether a vector store cannot be written now (1: failing: job results wait on the stream, ingest runs wait and retry; 0: writing), from the results sink and the gateway\'s ingest runs',
    labelNames: ['backend'] as const,
    registers: [this.registry],
  });

  readonly s3Retries = new Counter({
    name: 'shoal_s3_retries_total',
    help: 'S3 operations retried after a transient failure (S3 down, throttling, 5xx): a rising rate means the object store is degraded',
    registers: [this.registry],
  });

  /** What a RetryingStore reports (adapters/stores/shared/delivery.ts), recorded on this registry. */
  readonly sinkObserver: StoreWriteObserver = {
    write: (backend, outcome, seconds) => {
      this.sinkWrites.inc({ backend, outcome });
      if (outcome !== 'retry') this.sinkWriteSeconds.observe({ backend }, seconds);
    },
  };

  constructor(options: ShoalMetricsOptions = {}) {
    if (options.defaultLabels !== undefined) this.registry.setDefaultLabels(options.defaultLabels);
    // prom-client's own names start with process_ or nodejs_: `shoal_` keeps them apart from another exporter's without saying process twice.
    if (options.processMetrics ?? true) collectDefaultMetrics({ register: this.registry, prefix: 'shoal_' });
  }

  /** Text exposition for a /metrics endpoint. */
  async render(): Promise<{ contentType: string; body: string }> {
    return { contentType: this.registry.contentType, body: await this.registry.metrics() };
  }
}
