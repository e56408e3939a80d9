import type { ShoalSettings } from '../settings/shoal-settings.js';
import type { NatsConnection } from '@nats-io/transport-node';
import { NatsEngine } from '../../adapters/nats/rpc/engine-client.js';
import { JobsClient } from '../../adapters/nats/jobs/jobs-client.js';
import type { PayloadStore } from '../../adapters/nats/connection/payloads.js';
import type { Topology } from '../../adapters/nats/connection/topology.js';
import type { Logger } from '../../adapters/observability/logger.js';
import type { ShoalMetrics } from '../../adapters/observability/metrics.js';
import type { Engine } from '../../adapters/protocol/engine.js';
import { ErrorCode, ShoalError } from '../../adapters/protocol/errors.js';
import type { Lifecycle } from '../../adapters/protocol/lifecycle.js';
import { openStore, parseIndexRef } from '../../adapters/stores/open.js';
import type { Store } from '../../adapters/stores/store.js';
import { pipelineByName } from '../../pipelines/documents/builtin.js';
import { DocumentJobs } from '../../pipelines/documents/document-jobs.js';
import type { WorkerConfig } from './config.js';

/**
 * Composes the documents role of `shoal worker --documents` (pipelines/documents/document-jobs.ts)
 * from the worker's configuration: pipelines by name (built-in or SHOAL_PIPELINES), indexes by
 * name (SHOAL_INDEXES, each opened once and kept), encode jobs and token counts through the model
 * workers, OCR through this worker's engine.
 */

export interface DocumentsRoleOptions {
  nc: NatsConnection;
  topology: Topology;
  config: WorkerConfig;
  engine: Engine;
  payloads: PayloadStore;
  logger: Logger;
  settings: ShoalSettings;
  metrics?: ShoalMetrics | undefined;
}

export class DocumentsRole implements Lifecycle {
  readonly #jobs: DocumentJobs;
  readonly #rpc: NatsEngine;
  readonly #sinks: Map<string, Store>;

  private constructor(jobs: DocumentJobs, rpc: NatsEngine, sinks: Map<string, Store>) {
    this.#jobs = jobs;
    this.#rpc = rpc;
    this.#sinks = sinks;
  }

  static async start(options: DocumentsRoleOptions): Promise<DocumentsRole> {
    const { config, nc, topology, logger } = options;
    const rpc = new NatsEngine(nc, { prefix: topology.names.prefix, loadTimeoutMs: 30_000 });
    const client = await JobsClient.open(nc, { topology: config.topology, fileRoots: config.fileRoots, s3: config.s3 });
    const sinks = new Map<string, Store>();
    const credentials = options.settings.stores;
    const s3 = options.settings.s3;
    const openIndex = (name: string, table: string): Store => {
      const target = Object.hasOwn(config.indexes, name) ? config.indexes[name] : undefined;
      if (target === undefined) {
        const known = Object.keys(config.indexes);
        throw new ShoalError(ErrorCode.NOT_FOUND, `no index named ${JSON.stringify(name)} on this worker (${known.length === 0 ? 'none configured: set SHOAL_INDEXES=name=dir' : `configured: ${known.join(', ')}`})`);
      }
      const key = `${name}\u0000${table}`;
      let sink = sinks.get(key);
      if (sink === undefined) {
        // Parsed once per index and table this worker serves; the store is kept open for every later job.
        sink = openStore(parseIndexRef(target, { table, credentials, s3 })).store;
        sinks.set(key, sink);
      }
      return sink;
    };
    const jobs = await DocumentJobs.start({
      nc,
      topology,
      pipelines: config.documentPipelines,
      resolvePipeline: (name) => pipelineByName(name, config.pipelinesDir),
      openIndex,
      payloads: options.payloads,
      rpc,
      jobs: client,
      engine: options.engine,
      workerId: config.workerId,
      ackWaitMs: config.consumer.ackWaitMs,
      maxDeliver: config.consumer.maxDeliver,
      limits: config.parseLimits,
      stallMs: config.documentStallMs,
      logger,
      ...(options.metrics === undefined ? {} : { onEnded: (state: string) => options.metrics?.documentsEnded.inc({ state }), onStalled: () => options.metrics?.documentBatchesStalled.inc() }),
    });
    logger.info({ pipelines: config.documentPipelines, indexes: Object.keys(config.indexes) }, 'documents role started');
    return new DocumentsRole(jobs, rpc, sinks);
  }

  get inFlight(): number {
    return this.#jobs.inFlight;
  }

  async drain(): Promise<void> {
    await this.#jobs.drain();
    await this.#closeRest();
  }

  async close(): Promise<void> {
    await this.#jobs.close();
    await this.#closeRest();
  }

  async #closeRest(): Promise<void> {
    await this.#rpc.close();
    const sinks = [...this.#sinks.values()];
    this.#sinks.clear();
    await Promise.all(sinks.map((sink) => sink.close().catch(() => undefined)));
  }
}
