import type { Command } from 'commander';
import { z } from 'zod';
import { logLevelFromEnv, natsSettingsFromEnv, s3SettingsFromEnv } from '../../settings/environment.js';
import { envValue } from '../../settings/table.js';
import { createLogger } from '../../../adapters/observability/logger.js';
import type { CliApp } from '../app.js';
import { CommaListFlag, parseFlags } from '../line-options.js';
import { interrupted } from './gateway.js';

/**
 * `shoal sink`: writes every job's results from the results stream into a local folder
 * (`<dir>/<job>/part-NNNNNN.jsonl`, one line per item), until SIGINT/SIGTERM.
 */

const SinkFlags = z.strictObject({
  dir: z.string().min(1).optional(),
  nats: CommaListFlag.optional(),
  prefix: z.string().min(1).optional(),
});

const EXAMPLE = `
Environment (flags win): SHOAL_RESULTS_DIR, SHOAL_SUBJECT_PREFIX; NATS_URL, NATS_CREDS,
NATS_USER/NATS_PASSWORD, NATS_TOKEN, NATS_TLS_CA/CERT/KEY.

Files: <dir>/<job>/part-000000.jsonl holds one JSON line per item of that part (encode and
extract: {"index", "id", "dense"...}; score: {"index", "id", "score"}), indexes counted over the
whole job; a failed part leaves <dir>/<job>/part-000000.error.json with its error.

Examples:
  $ shoal sink --dir /data/shoal-results --nats nats://nats:4222
  $ shoal submit encode --model BAAI/bge-small-en-v1.5 -i docs.jsonl --job-id docs-1 --wait
  $ cat /data/shoal-results/docs-1/part-*.jsonl | wc -l`;

export function registerSink(program: Command, app: CliApp): void {
  program
    .command('sink')
    .summary('write job results from NATS into a local folder')
    .description('Consume the results stream (durable: nothing is missed while it is down) and write each job part as JSON Lines under --dir.')
    .option('--dir <dir>', 'folder for the results (env SHOAL_RESULTS_DIR; default ./shoal-results)')
    .option('--nats <urls>', 'NATS server URLs, comma-separated (env NATS_URL; default nats://127.0.0.1:4222)')
    .option('--prefix <prefix>', 'subject prefix (env SHOAL_SUBJECT_PREFIX; default shoal)')
    .addHelpText('after', EXAMPLE)
    .action(async (_options: unknown, self: Command) => {
      const flags = parseFlags(SinkFlags, self);
      const cli = app.config(self);
      const { resultsDirFrom, startSink } = await import('../../sink/main.js');
      const env = app.io.env;
      const dir = resultsDirFrom(flags.dir, env);
      const logger = createLogger('sink', cli.quiet ? 'error' : logLevelFromEnv(env));
      const sink = await startSink({
        nats: { ...natsSettingsFromEnv(env), ...(flags.nats === undefined ? {} : { servers: flags.nats }) },
        prefix: flags.prefix ?? envValue(env, 'subjectPrefix'),
        dir,
        logger,
        s3: s3SettingsFromEnv(env),
      });
      if (!cli.quiet) app.io.stderr.write(`shoal sink writing results into ${sink.dir} (Ctrl-C to stop)\n`);
      await interrupted(app.io.signal);
      await sink.drain();
    });
}
