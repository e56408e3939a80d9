import type { ShoalSettings } from '../settings/shoal-settings.js';
import type { NatsConnection } from '@nats-io/transport-node';
import { NatsEngine } from '../../adapters/nats/rpc/engine-client.js';
import { JobsClient } from '../../adapters/nats/jobs/jobs-client.js';
import type { PayloadStore } from '../../adapters/nats/connection/payloads.js';
import type { Topology } from '../../adapters/nats/connection/topology.js';
import type { Logger } from '../../adapters/observability/logger.js';
import type { ShoalMetrics } from '../../adapters/observability/metrics.js';
import type { Lifecycle } from '../../adapters/protocol/lifecycle.js';
import { ClassifyJobs } from '../../pipelines/classify/classify-jobs.js';
import type { WorkerConfig } from './config.js';

/**
 * Composes the classify role of `shoal worker --classify` (pipelines/classify/classify-jobs.ts)
 * from the worker's configuration: encode jobs through the model workers, reranks by
 * request-reply (JobsEngine retries them while a worker restarts), the payload store for specs, chunk lines,
 * category matrices and result targets, the local category cache under SHOAL_CACHE_DIR.
 */

export interface ClassifyRoleOptions {
  nc: NatsConnection;
  topology: Topology;
  config: WorkerConfig;
  payloads: PayloadStore;
  logger: Logger;
  settings: ShoalSettings;
  metrics?: ShoalMetrics | undefined;
}

export class ClassifyRole implements Lifecycle {
  readonly #jobs: ClassifyJobs;
  readonly #rpc: NatsEngine;

  private constructor(jobs: ClassifyJobs, rpc: NatsEngine) {
    this.#jobs = jobs;
    this.#rpc = rpc;
  }

  static async start(options: ClassifyRoleOptions): Promise<ClassifyRole> {
    const { config, nc, topology, logger, metrics } = options;
    const rpc = new NatsEngine(nc, { prefix: topology.names.prefix, loadTimeoutMs: 30_000 });
    const client = await JobsClient.open(nc, { topology: config.topology, fileRoots: config.fileRoots, s3: config.s3 });
    const jobs = await ClassifyJobs.start({
      nc,
      topology,
      payloads: options.payloads,
      rpc,
      jobs: client,
      cacheDir: options.settings.cacheDir,
      workerId: config.workerId,
      ackWaitMs: config.consumer.ackWaitMs,
      maxDeliver: config.consumer.maxDeliver,
      logger,
      ...(metrics === undefined
        ? {}
        : {
            onChunk: (outcome: string) => metrics.classifyChunks.inc({ outcome }),
            onCategories: (source: string) => metrics.classifyCategoryMatrices.inc({ source }),
          }),
    });
    logger.info({ consumer: `${topology.names.prefix}.classify.>` }, 'classify role started');
    return new ClassifyRole(jobs, rpc);
  }

  get inFlight(): number {
    return this.#jobs.inFlight;
  }

  async drain(): Promise<void> {
    await this.#jobs.drain();
    await this.#rpc.close();
  }

  async close(): Promise<void> {
    await this.#jobs.close();
    await this.#rpc.close();
  }
}
