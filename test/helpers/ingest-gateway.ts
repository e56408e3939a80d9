import type { NatsConnection } from '@nats-io/transport-node';
import type { FastifyInstance } from 'fastify';
import { DISCOVERY_STALL_MS, NatsEngine } from '../../adapters/nats/rpc/engine-client.js';
import { JobsClient, type JobsClientOptions } from '../../adapters/nats/jobs/jobs-client.js';
import { servedModelGate } from '../../adapters/nats/jobs/model-gate.js';
import { ShoalMetrics } from '../../adapters/observability/metrics.js';
import type { InferenceEngine } from '../../pipelines/inference/engine.js';
import { buildGatewayApp } from '../../services/gateway/app.js';
import type { GatewaySettings } from '../../services/gateway/context.js';
import { IngestRuns } from '../../services/gateway/ingest-runs.js';
import type { ShoalWorker } from '../../services/worker/worker.js';
import { TEST_SETTINGS } from './gateway.js';
import { startNatsServer, type NatsServerHandle } from './nats-server.js';
import { referenceEngine, startTestWorker, testConnection } from './nats-worker.js';

/**
 * The gateway as the ingest tests need it, with real parts: a private nats-server, one in-process
 * worker serving the kit's models in the parse role, IngestRuns (the coordinator behind
 * POST /v1/ingest) over the test's connection, and the in-process engine answering queries.
 * Written once here because five test files had each spelled out the same set-up and teardown.
 */
export interface IngestGateway {
  readonly server: NatsServerHandle;
  readonly worker: ShoalWorker;
  readonly nc: NatsConnection;
  readonly engine: InferenceEngine;
  readonly ingest: IngestRuns;
  readonly app: FastifyInstance;
  /** Stops everything in the reverse order of start; safe to call on a partly started gateway. */
  close(): Promise<void>;
}

export interface IngestGatewayOptions {
  prefix: string;
  /** Index names the gateway knows (SHOAL_INDEXES), name → path or URI. */
  indexes: Record<string, string>;
  /** Folders `file://` documents may come from (SHOAL_FILE_ROOTS). */
  fileRoots?: readonly string[];
  /**
   * Gate jobs and runs on models some worker serves, as a deployed gateway does; off where the
   * test names a model the in-process worker serves anyway and the discovery round-trip adds nothing.
   */
  servedModelsOnly?: boolean;
  settings?: Partial<GatewaySettings>;
}

export async function startIngestGateway(options: IngestGatewayOptions): Promise<IngestGateway> {
  const stops: (() => Promise<unknown>)[] = [];
  const close = async (): Promise<void> => {
    for (const stop of stops.splice(0).reverse()) await stop().catch(() => undefined);
  };
  try {
    const server = await startNatsServer();
    stops.push(() => server.stop());
    const worker = await startTestWorker(server.url, options.prefix, { parse: true });
    stops.push(() => worker.close());
    const nc = await testConnection(server.url);
    stops.push(() => nc.close());
    const discovery = new NatsEngine(nc, { prefix: options.prefix });
    const modelGate: JobsClientOptions['modelGate'] = (topology) => servedModelGate({ topology, discover: () => discovery.workers(500, DISCOVERY_STALL_MS) });
    const jobs = await JobsClient.open(nc, { topology: { prefix: options.prefix }, ...(options.servedModelsOnly === false ? {} : { modelGate }) });
    const engine = referenceEngine();
    stops.push(() => engine.close());
    const ingest = new IngestRuns({ connection: () => nc, s3: {}, prefix: options.prefix, ...(options.fileRoots ? { fileRoots: [...options.fileRoots] } : {}) });
    stops.push(() => ingest.close());
    const app = buildGatewayApp(
      { engine, jobs, ingest, models: async () => [], metrics: new ShoalMetrics(), ready: async () => ({ ready: true }) },
      { ...TEST_SETTINGS, natsPrefix: options.prefix, indexes: options.indexes, ...options.settings },
    );
    stops.push(() => app.close());
    return { server, worker, nc, engine, ingest, app, close };
  } catch (error) {
    await close();
    throw error;
  }
}
