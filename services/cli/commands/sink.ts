import type { ShoalSettings } from '../../settings/shoal-settings.js';
import type { Command } from 'commander';
import { z } from 'zod';
import { ErrorCode, hasErrorCode, ShoalError } from '../../../adapters/protocol/errors.js';
import type { CliApp } from '../app.js';
import { NatsUrlsFlag, parseFlags } from '../line-options.js';
import { INDEX_HELP } from '../index-ref.js';
import { interrupted } from './gateway.js';

/**
 * `shoal sink`: writes every job's results from the results stream into a local folder
 * (`<dir>/<job>/part-NNNNNN.jsonl`, one line per item), or with `--index URI` the encode results
 * into a vector store (one row per item, upserted by id), until SIGINT/SIGTERM.
 */

/** A port number as a flag or variable gives it (0: any free port). */
const MetricsPort = z.string().trim().regex(/^\d+$/, 'must be a port number').transform(Number).pipe(z.number().int().min(0).max(65535));

const SinkFlags = z.strictObject({
  dir: z.string().min(1).optional(),
  index: z.string().min(1).max(4096).optional(),
  table: z.string().regex(/^[A-Za-z0-9_-]{1,48}$/, "1 to 48 letters, digits, '_' or '-'").optional(),
  nats: NatsUrlsFlag.optional(),
  prefix: z.string().min(1).optional(),
  metricsPort: MetricsPort.optional(),
  metricsHost: z.string().min(1).optional(),
});

/** --metrics-port, else SHOAL_METRICS_PORT; null: no metrics port. */
function metricsPortFrom(flag: number | undefined, settings: ShoalSettings): number | null {
  if (flag !== undefined) return flag;
  const raw = settings.value('metricsPort');
  if (raw === undefined) return null;
  const parsed = MetricsPort.safeParse(raw);
  if (!parsed.success) throw new ShoalError(ErrorCode.CONFIG_INVALID, `SHOAL_METRICS_PORT ${JSON.stringify(raw)} must be a port number (0-65535)`);
  return parsed.data;
}

const EXAMPLE = `
Environment (flags win): SHOAL_RESULTS_DIR, SHOAL_SUBJECT_PREFIX, SHOAL_STREAM_REPLICAS,
SHOAL_METRICS_PORT, SHOAL_METRICS_HOST; NATS_URL, NATS_CREDS, NATS_USER/NATS_PASSWORD, NATS_TOKEN, NATS_TLS_CA/CERT/KEY.

Metrics: with --metrics-port, /metrics (shoal_sink_writes_total{backend,outcome},
shoal_sink_write_seconds, shoal_sink_degraded{backend}), /healthz and /readyz on 127.0.0.1
(--metrics-host 0.0.0.0 for a scraper on another host).

Files: <dir>/<job>/part-000000.jsonl holds one JSON line per item of that part (encode and
extract: {"index", "id", "dense"...}; score: {"index", "id", "score"}), indexes counted over the
whole job; a failed part leaves <dir>/<job>/part-000000.error.json with its error.

With --index URI (docs/storage.md, "Results into a vector store"), encode results become rows
of that store instead: id = the item's id (else <job>:<index>), the dense vector, document_id =
the job, page = the part, settings = the model. A message is acked only once its rows are
committed; while the store is down results wait on the stream and the job status shows
"degraded". Jobs submitted with {"kind": "index", "index": NAME} go into the index that
SHOAL_INDEXES (name=URI, comma-separated; the gateway's names) calls NAME.
Credentials: PGPASSWORD, CHROMA_API_KEY, QDRANT_API_KEY (never in logs).

Examples:
  $ shoal sink --dir /data/shoal-results --nats nats://nats:4222
  $ shoal sink --index postgres://shoal@db:5432/search --table job_vectors
  $ shoal sink --index chroma://chroma:8000/jobs --metrics-port 9465   # curl 127.0.0.1:9465/metrics
  $ shoal submit encode --model BAAI/bge-small-en-v1.5 -i docs.jsonl --job-id docs-1 --wait
  $ cat /data/shoal-results/docs-1/part-*.jsonl | wc -l`;

export function registerSink(program: Command, app: CliApp): void {
  program
    .command('sink')
    .summary('write job results from NATS into a local folder or a vector store')
    .description('Consume the results stream (durable: nothing is missed while it is down) and write each job part as JSON Lines under --dir, or as rows of the vector store --index names.')
    .option('--dir <dir>', 'folder for the results (env SHOAL_RESULTS_DIR; default ./shoal-results)')
    .option('--index <uri>', `write encode results into a vector store instead of --dir: ${INDEX_HELP}`)
    .option('--table <name>', 'table or collection for --index when the URI names none (default chunks)')
    .option('--nats <urls>', 'NATS server URLs, comma-separated (env NATS_URL; default nats://127.0.0.1:4222)')
    .option('--prefix <prefix>', 'subject prefix (env SHOAL_SUBJECT_PREFIX; default shoal)')
    .option('--metrics-port <port>', 'serve /metrics (Prometheus), /healthz and /readyz on this port (env SHOAL_METRICS_PORT; default: off)')
    .option('--metrics-host <host>', 'address of the metrics port (env SHOAL_METRICS_HOST; default 127.0.0.1)')
    .addHelpText('after', EXAMPLE)
    .action(async (_options: unknown, self: Command) => {
      const flags = parseFlags(SinkFlags, self);
      if (flags.index !== undefined && flags.dir !== undefined) throw new ShoalError(ErrorCode.INVALID_INPUT, '--dir and --index are exclusive: results go into a folder or into a vector store');
      if (flags.table !== undefined && flags.index === undefined) throw new ShoalError(ErrorCode.INVALID_INPUT, '--table needs --index');
      const cli = app.config(self);
      const [{ resultsDirFrom, startSink }, { createLogger }] = await Promise.all([import('../../sink/main.js'), import('../../../adapters/observability/logger.js')]);
      const settings = app.settings;
      const dir = resultsDirFrom(flags.dir, settings);
      const logger = createLogger('sink', cli.quiet ? 'error' : settings.logLevel());
      const starting = startSink({
        nats: { ...settings.nats, ...(flags.nats === undefined ? {} : { servers: flags.nats }) },
        prefix: flags.prefix ?? settings.value('subjectPrefix'),
        replicas: settings.streamReplicas,
        dir,
        logger,
        s3: settings.s3,
        ...(flags.index === undefined ? {} : { index: { uri: flags.index, table: flags.table } }),
        indexes: settings.indexes,
        credentials: settings.stores,
        metricsPort: metricsPortFrom(flags.metricsPort, settings),
        metricsHost: flags.metricsHost ?? settings.value('metricsHost'),
        signal: app.io.signal,
      });
      // Stopped while still connecting to NATS: a clean stop (exit 0), as a worker's.
      const sink = await starting.catch((error: unknown) => {
        if (app.io.signal.aborted && hasErrorCode(error, ErrorCode.CANCELLED)) return null;
        throw error;
      });
      if (sink === null) return;
      if (!cli.quiet) app.io.stderr.write(`shoal sink writing results into ${sink.dir} (Ctrl-C to stop)\n`);
      if (!cli.quiet && sink.metricsUrl !== null) app.io.stderr.write(`shoal sink metrics on ${sink.metricsUrl}/metrics\n`);
      await interrupted(app.io.signal);
      await sink.drain();
    });
}
