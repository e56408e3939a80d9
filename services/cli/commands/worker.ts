import type { Command } from 'commander';
import { z } from 'zod';
import type { CliApp } from '../app.js';
import { CommaListFlag, NatsUrlsFlag, PositiveIntFlag, parseFlags } from '../line-options.js';

/**
 * `shoal worker`: pulls job parts from NATS JetStream for the models it serves and answers
 * request-reply calls for them, until SIGTERM/SIGINT, then drains (docs/nats.md). Settings come
 * from flags, then SHOAL_* / NATS_* variables, then defaults; the global --catalog, --model-dir,
 * --threads, --providers and --batch-tokens configure its engine.
 */

const WorkerFlags = z.strictObject({
  models: CommaListFlag.optional(),
  preload: CommaListFlag.optional(),
  nats: NatsUrlsFlag.optional(),
  prefix: z.string().min(1).optional(),
  concurrency: PositiveIntFlag(1024).optional(),
  ackWait: PositiveIntFlag(3_600_000).optional(),
  maxDeliver: PositiveIntFlag(1000).optional(),
  drainTimeout: PositiveIntFlag(3_600_000).optional(),
  workerId: z.string().min(1).optional(),
  fileRoot: z.array(z.string().min(1)).optional(),
  metricsPort: z.string().trim().regex(/^\d+$/, 'must be a port number').transform(Number).pipe(z.number().int().min(0).max(65535)).optional(),
  metricsHost: z.string().min(1).optional(),
  parse: z.boolean().optional(),
  documents: z.boolean().optional(),
  classify: z.boolean().optional(),
  pipelines: CommaListFlag.optional(),
});

const EXAMPLE = `
Environment (flags win): NATS_URL, NATS_USER/NATS_PASSWORD, NATS_TOKEN, NATS_CREDS, NATS_TLS_CA,
  NATS_TLS_CERT, NATS_TLS_KEY, SHOAL_MODELS, SHOAL_PRELOAD, SHOAL_SUBJECT_PREFIX, SHOAL_STREAM_REPLICAS,
  SHOAL_CONCURRENCY, SHOAL_ACK_WAIT_MS, SHOAL_MAX_DELIVER, SHOAL_MEMORY_BUDGET, SHOAL_DRAIN_TIMEOUT_MS, SHOAL_WORKER_ID,
  SHOAL_FILE_ROOTS, SHOAL_PARSE, SHOAL_DOCUMENTS, SHOAL_CLASSIFY, SHOAL_DOCUMENT_PIPELINES, SHOAL_PIPELINES, SHOAL_INDEXES,
  SHOAL_METRICS_PORT, SHOAL_METRICS_HOST, SHOAL_IMAGE_ROOTS (":"-separated), SHOAL_IMAGE_HOSTS, SHOAL_LOG_LEVEL.

Examples:
  $ shoal worker --models sentence-transformers/all-MiniLM-L6-v2 --nats nats://nats:4222
  $ SHOAL_MODEL_DIR=/models shoal worker --preload BAAI/bge-small-en-v1.5 --concurrency 16
  $ shoal worker --models BAAI/bge-small-en-v1.5 --metrics-port 9464   # Prometheus scrapes :9464/metrics
  $ SHOAL_INDEXES=docs=/srv/index shoal worker --documents              # document jobs end to end (no model of its own)
  $ shoal worker --classify                                              # classification jobs (no model of its own)`;


function collect(value: string, previous: string[] | undefined): string[] {
  return [...(previous ?? []), value];
}

export function registerWorker(program: Command, app: CliApp): void {
  program
    .command('worker')
    .summary('serve models from NATS: JetStream jobs and request-reply')
    .description('Pull job parts for the served models from NATS JetStream and answer request-reply calls, until SIGTERM/SIGINT (then drain).')
    .option('--models <list>', 'models to serve, comma-separated (default: every catalog entry, else every model under --model-dir)')
    .option('--preload <list>', 'models to load at start and keep resident')
    .option('--nats <urls>', 'NATS server URLs, comma-separated (env NATS_URL; default nats://127.0.0.1:4222)')
    .option('--prefix <prefix>', 'subject prefix (env SHOAL_SUBJECT_PREFIX; default shoal)')
    .option('--concurrency <n>', 'job parts in flight at once (default 32)')
    .option('--ack-wait <ms>', 'ack wait of the job consumers, in ms (default 30000)')
    .option('--max-deliver <n>', 'deliveries of a part before it is dead-lettered (default 5)')
    .option('--drain-timeout <ms>', 'longest graceful drain on SIGTERM, in ms (default 30000)')
    .option('--worker-id <id>', 'name in results and logs (default: host-pid)')
    .option('--file-root <dir>', 'folder file:// payloads and results may use; repeatable (default: none)', collect)
    .option('--metrics-port <port>', 'serve /metrics (Prometheus), /healthz and /readyz on this port (env SHOAL_METRICS_PORT; default: off)')
    .option('--metrics-host <host>', 'address of the metrics port (env SHOAL_METRICS_HOST; default 127.0.0.1; 0.0.0.0 for a scraper on another host)')
    .option('--parse', 'also parse documents for `shoal ingest --nats` (env SHOAL_PARSE=1)')
    .option('--documents', 'run document jobs end to end (env SHOAL_DOCUMENTS=1); serves no model unless --models names some')
    .option('--classify', 'run classification jobs (env SHOAL_CLASSIFY=1; `shoal classify --nats`, POST /v1/classify with SHOAL_CLASSIFY_JOBS); serves no model unless --models names some')
    .option('--pipelines <names>', 'pipelines the --documents role serves, comma-separated (env SHOAL_DOCUMENT_PIPELINES; default documents)')
    .addHelpText('after', EXAMPLE)
    .action(async (_options: unknown, self: Command) => {
      const flags = parseFlags(WorkerFlags, self);
      const cli = app.config(self);
      const fromFlags: Record<string, unknown> = {
        // The global flags over the same variables the worker reads (services/settings): already merged.
        engine: { ...cli.engine },
        nats: flags.nats === undefined ? undefined : { servers: flags.nats },
        topology: flags.prefix === undefined ? undefined : { prefix: flags.prefix },
        consumer: {
          ...(flags.ackWait === undefined ? {} : { ackWaitMs: flags.ackWait }),
          ...(flags.maxDeliver === undefined ? {} : { maxDeliver: flags.maxDeliver }),
        },
        models: flags.models,
        preload: flags.preload,
        concurrency: flags.concurrency,
        drainTimeoutMs: flags.drainTimeout,
        workerId: flags.workerId,
        fileRoots: flags.fileRoot,
        metricsPort: flags.metricsPort,
        metricsHost: flags.metricsHost,
        parse: flags.parse,
        documents: flags.documents,
        classify: flags.classify,
        documentPipelines: flags.pipelines,
      };
      // The worker (NATS, pino, prom-client) is loaded when it runs, not when the command tree is built.
      const [{ createLogger }, { mergeWorkerInput, parseWorkerConfig, workerConfigFromEnv }, { runWorker }] = await Promise.all([
        import('../../../adapters/observability/logger.js'),
        import('../../worker/config.js'),
        import('../../worker/main.js'),
      ]);
      const config = parseWorkerConfig(mergeWorkerInput(workerConfigFromEnv(app.settings), fromFlags));
      const logger = createLogger('worker', cli.quiet ? 'error' : app.settings.logLevel());
      await runWorker(config, { signal: app.io.signal, logger, settings: app.settings });
    });
}
