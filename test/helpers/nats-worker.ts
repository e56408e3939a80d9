import { join } from 'node:path';
import type { NatsConnection } from '@nats-io/transport-node';
import { connectNats } from '../../adapters/nats/connection/connection.js';
import { RpcServer } from '../../adapters/nats/rpc/rpc-server.js';
import { createLogger } from '../../adapters/observability/logger.js';
import { WIRE_VERSION } from '../../adapters/protocol/jobs.js';
import { natsNames, type NatsNames } from '../../adapters/protocol/subjects.js';
import { InferenceEngine } from '../../pipelines/inference/engine.js';
import type { EngineOptionsInput } from '../../pipelines/inference/engine-options.js';
import { resolveWorkerConfig, type WorkerConfigInput } from '../../services/worker/config.js';
import { ShoalWorker } from '../../services/worker/worker.js';
import { startNatsServer } from './nats-server.js';
import { FIXTURES_DIR } from './shared.js';

/**
 * Workers, clients and a reference engine for the NATS integration tests, all on the committed
 * fixture models (test/fixtures/models, served by name through the models dir) and one ORT
 * thread per model (the test machine has two cores).
 */

export const FIXTURE_MODELS_DIR = join(FIXTURES_DIR, 'models');
export const TINY_MEAN = 'tiny-bert-mean';
export const TINY_CROSS = 'tiny-cross-encoder';
export const TINY_NER = 'tiny-ner';

export const quietLogger = (): ReturnType<typeof createLogger> => createLogger('test', process.env.SHOAL_TEST_LOG_LEVEL ?? 'silent');

/** A worker config for tests: fixture models, one thread, fast retries; `overrides` win. */
export function testWorkerConfig(url: string, prefix: string, overrides: Partial<WorkerConfigInput> = {}): WorkerConfigInput {
  return {
    nats: { servers: [url], reconnectWaitMs: 50, reconnectMaxWaitMs: 500 },
    topology: { prefix },
    engine: { modelDirs: [FIXTURE_MODELS_DIR], threads: 1, memoryBudget: '2GiB' },
    models: [TINY_MEAN],
    consumer: { ackWaitMs: 5_000, maxDeliver: 3 },
    retryDelayMs: 20,
    maxRetryDelayMs: 100,
    affinityWaitMs: 0,
    drainTimeoutMs: 10_000,
    ...overrides,
  };
}

export async function startTestWorker(url: string, prefix: string, overrides: Partial<WorkerConfigInput> = {}): Promise<ShoalWorker> {
  return ShoalWorker.start(resolveWorkerConfig(testWorkerConfig(url, prefix, overrides)), { logger: quietLogger() });
}

export function testConnection(url: string): Promise<NatsConnection> {
  return connectNats({ servers: [url], retryFirstConnect: false, reconnectWaitMs: 50, reconnectMaxWaitMs: 500 });
}

/** The in-process engine the NATS results are compared with (`hooks` to watch its batches). */
export function referenceEngine(hooks?: EngineOptionsInput['hooks']): InferenceEngine {
  return new InferenceEngine({ sources: { modelDirs: [FIXTURE_MODELS_DIR], allowDownload: false }, runtime: { intraOpThreads: 1 }, memoryBudget: '1GiB', ...(hooks === undefined ? {} : { hooks }) });
}

let counter = 0;
/** A prefix no other test in the run uses (one topology per test). */
export function uniquePrefix(name: string): string {
  counter++;
  return `${name}${counter}x${process.pid}`;
}

/** A job part for the tiny mean model as a publisher would write it (1 part of 1, one text): tests vary its fields. */
export function encodePart(jobId: string, items: readonly string[] = ['a']): Record<string, unknown> {
  return {
    v: WIRE_VERSION,
    job_id: jobId,
    part: 0,
    parts: 1,
    primitive: 'encode',
    model: TINY_MEAN,
    request: { model: TINY_MEAN, items: [...items] },
    result: { kind: 'stream' },
    submitted_at: new Date().toISOString(),
  };
}

/** A job part the worker must refuse (no items): INVALID_INPUT, an error result, term(). */
export function emptyEncodePart(jobId: string): Record<string, unknown> {
  return encodePart(jobId, []);
}

/** A private nats-server, a connection and an RpcServer for the tiny mean model over a reference engine that counts its batches. */
export interface CountingRpc {
  nc: NatsConnection;
  names: NatsNames;
  /** Batches the engine has run so far. */
  batches(): number;
  stop(): Promise<void>;
}

export async function startCountingRpc(name: string, workerId: string): Promise<CountingRpc> {
  const server = await startNatsServer();
  const nc = await testConnection(server.url);
  let batches = 0;
  const engine = referenceEngine({ scheduler: { onBatch: () => batches++ } });
  await engine.preload(TINY_MEAN);
  const names = natsNames(uniquePrefix(name));
  const rpc = new RpcServer({ nc, names, engine, workerId, routes: [{ primitive: 'encode', model: TINY_MEAN }], resident: () => [TINY_MEAN] });
  rpc.start();
  return {
    nc,
    names,
    batches: () => batches,
    stop: async () => {
      await rpc.drain();
      await engine.close();
      await nc.close();
      await server.stop();
    },
  };
}
