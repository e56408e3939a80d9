import { resolve } from 'node:path';
import type { Command } from 'commander';
import { z } from 'zod';
import type { ModelCard } from '../../gateway/context.js';
import type { GatewayHandle } from '../../gateway/main.js';
import type { SinkHandle } from '../../sink/main.js';
import type { ShoalWorker } from '../../worker/worker.js';
import type { CliApp } from '../app.js';
import { CommaListFlag, parseFlags } from '../line-options.js';
import { startLocalNats, type LocalNats } from '../local-nats.js';
import { addGatewayOptions, gatewayConfig, interrupted } from './gateway.js';

/**
 * `shoal dev`: everything on one machine with one command. Starts a private nats-server (temp
 * store, free port), a worker serving every model it can resolve (catalog entries, else every
 * model under --model-dir / SHOAL_MODEL_DIR, plus the built-in paddleocr/pp-ocrv4; a folder there
 * that cannot be used is skipped with a warning), the results sink writing job results into
 * ./shoal-results, and the gateway on 127.0.0.1:8080, prints where they listen, and on Ctrl-C
 * stops them in order: HTTP intake and in-flight requests, then the worker (in-flight job parts
 * finish and are acked), then the sink, then nats-server, whose store is removed.
 * The TEI routes default to the first dense embedder, the first pair reranker and the first sparse
 * encoder served. The worker runs the parse role and, unless SHOAL_INDEXES says otherwise, the
 * gateway serves one index named `default` at ./shoal-index, so POST /v1/ingest and /v1/search
 * work at once.
 */

/** The index `default` of `shoal dev` when SHOAL_INDEXES is unset (the same folder as `shoal ingest`'s default). */
const DEV_INDEX_DIR = 'shoal-index';

const DevFlags = z.looseObject({
  models: CommaListFlag.optional(),
  resultsDir: z.string().min(1).optional(),
  imageRoot: z.array(z.string().min(1)).default([]),
});

function collect(value: string, previous: string[] | undefined): string[] {
  return [...(previous ?? []), value];
}

const EXAMPLE = `
Examples:
  $ SHOAL_MODEL_DIR=./models shoal dev
  $ shoal dev --port 9090 --models BAAI/bge-small-en-v1.5,cross-encoder/ms-marco-MiniLM-L6-v2
  $ shoal dev --image-root ./photos     # image items may name files under ./photos
  $ curl -s localhost:8080/v1/embeddings -H 'content-type: application/json' \\
      -d '{"model": "BAAI/bge-small-en-v1.5", "input": ["hello"]}'`;

/** Runs the cleanups in order; each runs even when an earlier one failed; the first error is rethrown. */
async function stopAll(steps: ReadonlyArray<() => Promise<void>>): Promise<void> {
  let first: unknown = null;
  for (const step of steps) {
    try {
      await step();
    } catch (error) {
      first ??= error;
    }
  }
  if (first !== null) throw first;
}

interface ServedModel {
  id: string;
  family: string;
  primitives: string[];
  denseEncoder: boolean;
  sparseEncoder: boolean;
  pairScorer: boolean;
}

async function servedModels(worker: ShoalWorker): Promise<ServedModel[]> {
  const { getFamily } = await import('../../../adapters/models/registry.js');
  const primitives = new Map<string, string[]>();
  for (const route of worker.routes) primitives.set(route.model, [...(primitives.get(route.model) ?? []), route.primitive]);
  const out: ServedModel[] = [];
  for (const [id, list] of primitives) {
    const family = (await worker.engine.profile(id)).family;
    const capabilities = getFamily(family).capabilities;
    out.push({ id, family, primitives: list, denseEncoder: capabilities.encode.includes('dense'), sparseEncoder: capabilities.encode.includes('sparse'), pairScorer: capabilities.score === 'pairs' });
  }
  return out;
}

function modelCards(worker: ShoalWorker, served: readonly ServedModel[]): () => Promise<readonly ModelCard[]> {
  return async () => {
    const resident = new Set(worker.engine.models().models.filter((m) => m.state === 'ready').map((m) => m.name));
    return served.map((m) => ({ id: m.id, family: m.family, primitives: m.primitives, resident: resident.has(m.id) }));
  };
}

export function registerDev(program: Command, app: CliApp): void {
  const command = program
    .command('dev')
    .summary('local stack in one process: private nats-server, worker and HTTP gateway')
    .description('Start a private nats-server, a worker serving every model it can resolve and the HTTP gateway; Ctrl-C stops all of them.');
  addGatewayOptions(command, { host: '127.0.0.1' })
    .option('--models <list>', 'models to serve, comma-separated (default: every catalog entry, else every model under --model-dir)')
    .option('--results-dir <dir>', 'folder the job results are written into (env SHOAL_RESULTS_DIR; default ./shoal-results)')
    .option('--image-root <dir>', 'folder that image paths in requests may point into; repeatable (adds to env SHOAL_IMAGE_ROOTS)', collect)
    .addHelpText('after', EXAMPLE)
    .action(async (_options: unknown, self: Command) => {
      const flags = parseFlags(DevFlags, self);
      const cli = app.config(self);
      await app.warnMissingModelDirs(cli);
      const level = cli.quiet ? 'error' : app.settings.logLevel('warn');
      const baseConfig = await gatewayConfig(self, app, { host: '127.0.0.1' });
      const [{ createLogger }, { ShoalMetrics }, { resolveNatsSettings }, { mergeWorkerInput, parseWorkerConfig, workerConfigFromEnv }, { ShoalWorker }, { startGateway }, { resultsDirFrom, startSink }] =
        await Promise.all([
          import('../../../adapters/observability/logger.js'),
          import('../../../adapters/observability/metrics.js'),
          import('../../../adapters/nats/connection/connection.js'),
          import('../../worker/config.js'),
          import('../../worker/worker.js'),
          import('../../gateway/main.js'),
          import('../../sink/main.js'),
        ]);
      const resultsDir = resultsDirFrom(flags.resultsDir, app.settings);
      const metrics = new ShoalMetrics({ defaultLabels: { service: 'dev' } });
      let nats: LocalNats | null = null;
      let worker: ShoalWorker | null = null;
      let gateway: GatewayHandle | null = null;
      let sink: SinkHandle | null = null;
      const stop = (): Promise<void> =>
        stopAll([
          async () => gateway?.close(),
          async () => worker?.drain(),
          async () => sink?.drain(),
          async () => nats?.close(),
        ]);
      try {
        nats = await startLocalNats({ settings: app.settings });
        const local = { servers: [nats.url], retryFirstConnect: false };
        const merged = mergeWorkerInput(workerConfigFromEnv(app.settings), {
          engine: { ...cli.engine, imageRoots: [...cli.engine.imageRoots, ...flags.imageRoot.map((dir) => resolve(dir))] },
          // One private server: SHOAL_STREAM_REPLICAS (for a cluster) does not apply to it.
          topology: { prefix: baseConfig.natsPrefix, replicas: 1 },
          models: flags.models,
          workerId: 'dev',
          serveBuiltins: true,
          // POST /v1/ingest works out of the box: this worker also parses documents.
          parse: true,
        });
        // The private server has no credentials: NATS_* variables of the environment are not for it.
        const workerConfig = parseWorkerConfig({ ...merged, nats: { ...local, name: 'shoal-dev-worker' } });
        worker = await ShoalWorker.start(workerConfig, { logger: createLogger('worker', level), metrics, settings: app.settings });
        // SHOAL_INDEXES unset: one index named `default`, the folder `shoal ingest` writes by default.
        // The sink gets the gateway's indexes, so a job with `{kind: "index"}` result lands in them.
        const indexes = baseConfig.indexes ?? Object.freeze({ default: resolve(DEV_INDEX_DIR) });
        sink = await startSink({
          nats: { ...local, name: 'shoal-dev-sink' },
          prefix: baseConfig.natsPrefix,
          dir: resultsDir,
          logger: createLogger('sink', level),
          indexes,
          s3: app.settings.s3,
          credentials: app.settings.stores,
        });
        const served = await servedModels(worker);
        const config = {
          ...baseConfig,
          streamReplicas: 1,
          nats: resolveNatsSettings({ ...local, name: 'shoal-dev-gateway' }),
          embedModel: baseConfig.embedModel ?? served.find((m) => m.denseEncoder)?.id ?? null,
          rerankModel: baseConfig.rerankModel ?? served.find((m) => m.pairScorer)?.id ?? null,
          sparseModel: baseConfig.sparseModel ?? served.find((m) => m.sparseEncoder)?.id ?? null,
          indexes,
        };
        gateway = await startGateway({ config, logger: createLogger('gateway', level), metrics, models: modelCards(worker, served) });
        const out = app.io.stdout;
        out.write(`shoal dev is running\n`);
        out.write(`  HTTP     ${gateway.url}  (/v1/encode /v1/score /v1/extract /v1/jobs /v1/ingest /v1/search, OpenAI /v1/embeddings, TEI /embed /rerank /embed_sparse /tokenize /info)\n`);
        out.write(`  console  ${gateway.url}/ui  (API reference: ${gateway.url}/docs)\n`);
        out.write(`  metrics  ${gateway.url}/metrics\n`);
        out.write(`  NATS     ${nats.url}  (nats-server pid ${nats.pid}, store ${nats.storeDir})\n`);
        out.write(`  results  ${sink.dir}/<job>/part-*.jsonl  (jobs: POST /v1/jobs or shoal submit --nats ${nats.url})\n`);
        out.write(`  models   ${served.map((m) => `${m.id} (${m.family})`).join(', ')}\n`);
        out.write(`  TEI      /embed → ${config.embedModel ?? 'none'}, /rerank → ${config.rerankModel ?? 'none'}, /embed_sparse → ${config.sparseModel ?? config.embedModel ?? 'none'}\n`);
        out.write(`  indexes  ${Object.entries(config.indexes).map(([name, target]) => `${name}=${target}`).join(', ')}  (POST /v1/ingest, /v1/search; parse role on)\n`);
        out.write(`Press Ctrl-C to stop.\n`);
        await interrupted(app.io.signal);
        if (!cli.quiet) app.io.stderr.write('shoal dev: stopping (draining requests and jobs)\n');
      } finally {
        await stop();
      }
      if (!cli.quiet) app.io.stderr.write('shoal dev: stopped\n');
    });
}
