import { ShoalSettings } from '../settings/shoal-settings.js';
import type { Priority } from '../../adapters/protocol/requests.js';
import { withNatsRetry } from '../../adapters/nats/connection/nats-retry.js';
import { jetstream } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { connectNats } from '../../adapters/nats/connection/connection.js';
import { DeadLetters } from '../../adapters/nats/jobs/dead-letter.js';
import { JobConsumer, type ModelState, type PulledRoute } from '../../adapters/nats/jobs/job-consumer.js';
import { DISPOSITIONS, PartHandler } from '../../adapters/nats/jobs/part-handler.js';
import { PartResults } from '../../adapters/nats/jobs/part-results.js';
import { PayloadStore } from '../../adapters/nats/connection/payloads.js';
import { S3Store } from '../../adapters/object-store/index.js';
import { RpcServer, type Route } from '../../adapters/nats/rpc/rpc-server.js';
import { StatusStore } from '../../adapters/nats/jobs/status-store.js';
import { ensureJobConsumer, ensureTopology, type Topology } from '../../adapters/nats/connection/topology.js';
import { createLogger, type Logger } from '../../adapters/observability/logger.js';
import type { ShoalMetrics } from '../../adapters/observability/metrics.js';
import { engineOptionsFromSettings } from '../settings/engine-settings.js';
import { loadCatalog } from '../../pipelines/inference/catalog.js';
import { InferenceEngine } from '../../pipelines/inference/engine.js';
import type { EngineOptionsInput } from '../../pipelines/inference/engine-options.js';
import type { PoolHooks, PoolSnapshot } from '../../pipelines/inference/pool-options.js';
import { poolMetrics, schedulerMetrics } from '../../pipelines/inference/telemetry.js';
import type { WorkerConfig } from './config.js';
import { ClassifyRole } from './classify-role.js';
import { DocumentsRole } from './documents-role.js';
import { ParseRole } from './parse-role.js';
import { routesFor, servedModels } from './served-models.js';
import type { Lifecycle } from '../../adapters/protocol/lifecycle.js';
import { ErrorCode, ShoalError, toShoalError } from '../../adapters/protocol/errors.js';

/**
 * `shoal worker`: an in-process engine fed from NATS. Composes the connection, the topology, the
 * job pull loop (bulk lane), the request-reply server (interactive lane) and the dead-letter
 * handler around one InferenceEngine, and owns their order of shutdown:
 * stop intake (requests, pulls) → finish in-flight parts (results published, acked) → stop the
 * dead-letter handler → release sessions → drain the connection; all within the drain deadline,
 * after which in-flight work is aborted and handed back to the queue for another worker (a fresh
 * copy of each part, so a shutdown never uses up a part's deliveries: part-handler.ts).
 */

export type WorkerState = 'starting' | 'running' | 'draining' | 'stopped';

export interface WorkerDeps {
  logger?: Logger;
  metrics?: ShoalMetrics;
  /** The process's settings (model sources, store credentials, S3, cache). @default this process's environment */
  settings?: ShoalSettings;
  /** Aborts start-up (a SIGTERM while NATS is still unreachable): start rejects with CANCELLED. */
  signal?: AbortSignal;
}

function residentModels(snapshot: PoolSnapshot): string[] {
  return snapshot.models.filter((m) => m.state === 'ready').map((m) => m.name);
}

function engineHooks(deps: WorkerDeps, onPool: (snapshot: PoolSnapshot) => void, queued: () => Readonly<Record<Priority, number>>): NonNullable<EngineOptionsInput['hooks']> {
  const metrics = deps.metrics === undefined ? undefined : poolMetrics(deps.metrics);
  const pool: PoolHooks = {
    ...metrics,
    onChange: (snapshot) => {
      metrics?.onChange?.(snapshot);
      onPool(snapshot);
    },
  };
  return deps.metrics === undefined ? { pool } : { pool, scheduler: schedulerMetrics(deps.metrics, queued) };
}

export class ShoalWorker implements Lifecycle {
  readonly id: string;
  readonly engine: InferenceEngine;
  readonly routes: readonly Route[];
  readonly #config: WorkerConfig;
  readonly #logger: Logger;
  readonly #nc: NatsConnection;
  readonly #rpc: RpcServer;
  readonly #consumer: JobConsumer;
  readonly #deadLetters: DeadLetters;
  readonly #parse: ParseRole | null;
  readonly #documents: DocumentsRole | null;
  readonly #classify: ClassifyRole | null;
  #state: WorkerState = 'starting';
  #stopping: Promise<void> | null = null;

  private constructor(parts: {
    config: WorkerConfig;
    logger: Logger;
    engine: InferenceEngine;
    routes: Route[];
    nc: NatsConnection;
    rpc: RpcServer;
    consumer: JobConsumer;
    deadLetters: DeadLetters;
    parse: ParseRole | null;
    documents: DocumentsRole | null;
    classify: ClassifyRole | null;
  }) {
    this.id = parts.config.workerId;
    this.#config = parts.config;
    this.#logger = parts.logger;
    this.engine = parts.engine;
    this.routes = parts.routes;
    this.#nc = parts.nc;
    this.#rpc = parts.rpc;
    this.#consumer = parts.consumer;
    this.#deadLetters = parts.deadLetters;
    this.#parse = parts.parse;
    this.#documents = parts.documents;
    this.#classify = parts.classify;
  }

  get state(): WorkerState {
    return this.#state;
  }

  static async start(config: WorkerConfig, deps: WorkerDeps = {}): Promise<ShoalWorker> {
    const logger = deps.logger ?? createLogger('worker');
    const catalog = config.engine.catalog === null ? null : await loadCatalog(config.engine.catalog);
    let rpc: RpcServer | null = null;
    let engine: InferenceEngine | null = null;
    const onPool = (snapshot: PoolSnapshot): void => rpc?.setResident(residentModels(snapshot));
    engine = new InferenceEngine({
      ...(catalog === null ? {} : { catalog }),
      ...engineOptionsFromSettings(config.engine, deps.settings ?? ShoalSettings.fromEnvironment()),
      preload: [...config.preload],
      hooks: engineHooks(deps, onPool, () => engine?.scheduler.queuedByLane ?? { interactive: 0, bulk: 0 }),
    });
    let nc: NatsConnection | null = null;
    try {
      // A documents or classify worker encodes through the model workers: it serves no model unless told to.
      const roleOnly = (config.documents || config.classify) && config.models.length === 0;
      const selection = roleOnly ? { models: [], discovered: false } : await servedModels(config.models, catalog, config.engine.modelDirs, config.serveBuiltins);
      const skipUnusable = (model: string, error: unknown): void => {
        const shoal = toShoalError(error);
        logger.warn({ model, code: shoal.code, err: shoal.message }, `skipping ${model}: it cannot be used (${shoal.code}: ${shoal.message})`);
      };
      const routes = await routesFor(engine, selection.models, selection.discovered ? skipUnusable : undefined);
      if (routes.length === 0 && !roleOnly) throw new ShoalError(ErrorCode.CONFIG_INVALID, `the worker serves no models: none of ${selection.models.join(', ')} can be used (see the warnings above)`);
      nc = await connectNats(config.nats, { logger, name: `shoal-worker ${config.workerId}`, ...(deps.signal === undefined ? {} : { signal: deps.signal }) });
      const connection = nc;
      // A replicated stream's leader may be electing (a broker restarting, a cluster forming on a busy
      // machine): its calls time out for a while, and a worker starting then waits, not exits.
      const retry = { ...(deps.signal === undefined ? {} : { signal: deps.signal }), onRetry: (error: ShoalError) => logger.warn({ code: error.code, err: error.message }, 'NATS not ready; setting up the topology again') };
      const topology = await withNatsRetry('set up the NATS topology', () => ensureTopology(connection, config.topology), retry);
      const pulled = await withNatsRetry('set up the consumers', () => ensureConsumers(topology, routes, config), retry);
      const js = jetstream(connection);
      const status = await StatusStore.open(connection, topology.names.statusBucket);
      // S3 retries are logged (every fifth of an operation) and counted: while S3 is down, parts wait here instead of failing.
      const s3Store = new S3Store(config.s3, {
        onRetry: (event) => {
          deps.metrics?.s3Retries.inc();
          if (event.attempt % 5 === 0) logger.warn({ code: event.error.code, err: event.error.message, retry: event.attempt + 1, delayMs: event.delayMs }, `S3 degraded: retrying ${event.what}`);
        },
      });
      const payloads = new PayloadStore(connection, { bucket: topology.names.payloadBucket, fileRoots: config.fileRoots, s3Store });
      const maxMessageBytes = connection.info?.max_payload ?? 1024 * 1024;
      const results = new PartResults({ js, jsm: topology.jsm, names: topology.names, payloads, status, workerId: config.workerId, maxMessageBytes });
      const deadLetters = new DeadLetters({
        js,
        jsm: topology.jsm,
        names: topology.names,
        results,
        status,
        logger,
        // A part whose worker died on its last delivery is buried from the server's advisory: a dead letter all the same.
        onAdvisoryBuried: (part) => deps.metrics?.jobParts.inc({ primitive: part?.primitive ?? 'unknown', model: part?.model ?? 'unknown', outcome: 'dead' }),
      });
      const ready = engine;
      const modelState = (model: string): ModelState => ready.models().models.find((m) => m.name === model)?.state ?? 'absent';
      const handler = new PartHandler({
        engine: ready,
        js,
        names: topology.names,
        results,
        status,
        payloads,
        deadLetters,
        maxDeliver: config.consumer.maxDeliver,
        retryDelayMs: config.retryDelayMs,
        maxRetryDelayMs: config.maxRetryDelayMs,
        partTimeoutMs: config.partTimeoutMs,
        logger,
      });
      await ready.start();
      rpc = new RpcServer({
        nc: connection,
        names: topology.names,
        engine: ready,
        workerId: config.workerId,
        routes,
        resident: () => residentModels(ready.models()),
        maxRequestMs: config.maxRequestMs,
        hasCapacity: (items) => ready.scheduler.hasCapacity(items),
        logger,
      });
      rpc.start();
      rpc.setResident(residentModels(ready.models()));
      const routeOfSubject = new Map(routes.map((route) => [topology.names.jobs(route.primitive, route.model), route]));
      // Every outcome of every route is exported from the start, at 0: increase() cannot see a
      // series that first appears at 1, so the first dead letter would otherwise raise no alert.
      for (const route of routes) for (const outcome of DISPOSITIONS) deps.metrics?.jobParts.inc({ primitive: route.primitive, model: route.model, outcome }, 0);
      const consumer = new JobConsumer({
        js,
        jsm: topology.jsm,
        stream: topology.names.jobsStream,
        routes: pulled,
        concurrency: config.concurrency,
        ackWaitMs: config.consumer.ackWaitMs,
        handle: async (msg, signal) => {
          const outcome = await handler.handle(msg, signal);
          const route = routeOfSubject.get(msg.subject);
          deps.metrics?.jobParts.inc({ primitive: route?.primitive ?? 'unknown', model: route?.model ?? 'unknown', outcome });
          return outcome;
        },
        modelState,
        hasCapacity: () => ready.scheduler.hasCapacity(1),
        affinityWaitMs: config.affinityWaitMs,
        recover: async () => {
          await ensureConsumers(await ensureTopology(connection, config.topology), routes, config);
        },
        logger,
      });
      consumer.start();
      // The job parts' max-deliveries advisories are a model worker's to bury: a worker that serves
      // no model (documents or classify only) has no part to answer for, and its NATS user may not.
      if (routes.length > 0) deadLetters.start();
      const parse = config.parse
        ? await ParseRole.start({ nc: connection, topology, engine: ready, payloads, workerId: config.workerId, ackWaitMs: config.consumer.ackWaitMs, maxDeliver: config.consumer.maxDeliver, retryDelayMs: config.retryDelayMs, logger, limits: config.parseLimits, extractModels: routes.filter((route) => route.primitive === 'extract').map((route) => route.model) })
        : null;
      const documents = config.documents ? await DocumentsRole.start({ nc: connection, topology, config, engine: ready, payloads, logger, settings: deps.settings ?? ShoalSettings.fromEnvironment(), metrics: deps.metrics }) : null;
      const classify = config.classify ? await ClassifyRole.start({ nc: connection, topology, config, payloads, logger, settings: deps.settings ?? ShoalSettings.fromEnvironment(), metrics: deps.metrics }) : null;
      const worker = new ShoalWorker({ config, logger, engine: ready, routes, nc: connection, rpc, consumer, deadLetters, parse, documents, classify });
      worker.#state = 'running';
      logger.info({ worker: config.workerId, routes: routes.map((r) => `${r.primitive}:${r.model}`), concurrency: config.concurrency, parse: config.parse, documents: config.documents, classify: config.classify }, 'worker started');
      return worker;
    } catch (error) {
      await rpc?.close().catch(() => undefined);
      await engine.close().catch(() => undefined);
      await nc?.close().catch(() => undefined);
      throw error;
    }
  }

  /**
   * Graceful stop (SIGTERM): no new requests or parts; parts in flight finish, publish and ack;
   * past `timeoutMs` they are aborted and handed back to the queue. Idempotent: later calls share the first.
   */
  drain(timeoutMs: number = this.#config.drainTimeoutMs): Promise<void> {
    this.#stopping ??= this.#drain(timeoutMs);
    return this.#stopping;
  }

  /** Stops at once: in-flight parts are handed back to the queue for other workers. */
  close(): Promise<void> {
    return this.drain(0);
  }

  async #drain(timeoutMs: number): Promise<void> {
    this.#state = 'draining';
    const started = Date.now();
    this.#logger.info({ inFlight: this.#consumer.inFlight, timeoutMs }, 'worker draining');
    const force = (): void => {
      this.#logger.warn({ inFlight: this.#consumer.inFlight }, 'drain deadline passed; aborting in-flight work');
      void this.#rpc.close();
      void this.#consumer.close();
      void this.#parse?.close();
      void this.#documents?.close();
      void this.#classify?.close();
    };
    const deadline = setTimeout(force, timeoutMs);
    try {
      // Documents and classification first: a batch or chunk in flight may wait on encode jobs this very worker serves.
      const roles = [this.#documents, this.#classify].filter((role) => role !== null);
      await Promise.all(roles.map((role) => (timeoutMs === 0 ? role.close() : role.drain())));
      const parse = this.#parse === null ? [] : [timeoutMs === 0 ? this.#parse.close() : this.#parse.drain()];
      await Promise.all(timeoutMs === 0 ? [this.#rpc.close(), this.#consumer.close(), ...parse] : [this.#rpc.drain(), this.#consumer.drain(), ...parse]);
    } finally {
      clearTimeout(deadline);
    }
    await this.#deadLetters.drain().catch((error: unknown) => this.#logger.warn({ err: String(error) }, 'stopping the dead-letter handler failed'));
    await this.engine.close();
    // drain() flushes the acks and naks still buffered; a broker that is gone must not hold the exit.
    const left = Math.max(1000, timeoutMs - (Date.now() - started));
    await Promise.race([this.#nc.drain().catch(() => undefined), new Promise((resolve) => setTimeout(resolve, left).unref())]);
    await this.#nc.close().catch(() => undefined);
    this.#state = 'stopped';
    this.#logger.info({ ms: Date.now() - started }, 'worker stopped');
  }
}

async function ensureConsumers(topology: Topology, routes: readonly Route[], config: WorkerConfig): Promise<PulledRoute[]> {
  const pulled: PulledRoute[] = [];
  for (const route of routes) {
    const consumer = await ensureJobConsumer(topology, route.primitive, route.model, config.consumer);
    pulled.push({ ...route, consumer });
  }
  return pulled;
}
