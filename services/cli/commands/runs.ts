import type { Command } from 'commander';
import { z } from 'zod';
import { JobId } from '../../../adapters/protocol/jobs.js';
import { ErrorCode, ShoalError } from '../../../adapters/protocol/errors.js';
import type { CliApp } from '../app.js';
import { NatsUrlsText, parseFlags } from '../line-options.js';
import { printable } from '../printable.js';
import { watchRun } from './ingest-jobs.js';
import { IngestBar } from './ingest-progress.js';

/**
 * `shoal runs watch RUN`: follows a document-job run from any machine (docs/ingest.md, "Document
 * jobs"), from its first event to its end, with the progress bar, summary and exit status of
 * `shoal ingest` (0 every document indexed or unchanged, 3 some failed, 130/143 stopped watching:
 * the run itself goes on in the workers).
 */

const WatchFlags = z.strictObject({ nats: NatsUrlsText.optional(), json: z.boolean().optional() });

const EXAMPLE = `
Examples:
  $ shoal ingest docs/ --nats nats://nats:4222 --index docs --detach    (prints the run id)
  $ shoal runs watch 5f0c2b1e-... --nats nats://nats:4222 --json`;

export function registerRuns(program: Command, app: CliApp): void {
  const runs = program.command('runs').summary('follow document-job runs').description('Commands about runs of document jobs (shoal ingest --nats --index NAME, POST /v1/ingest).');
  runs
    .command('watch')
    .summary('follow a run until every document ended')
    .argument('<run>', 'run id (printed by shoal ingest --nats, answered by POST /v1/ingest)')
    .option('--nats <url>', 'NATS servers (env NATS_URL; default nats://127.0.0.1:4222)')
    .option('--json', 'print the summary as one JSON object on stdout')
    .addHelpText('after', EXAMPLE)
    .action(async (run: string, _options: unknown, self: Command) => {
      const flags = parseFlags(WatchFlags, self);
      const runId = JobId.safeParse(run);
      if (!runId.success) throw new ShoalError(ErrorCode.INVALID_INPUT, `run id ${printable(run.slice(0, 80))} must be 1-64 characters of A-Z a-z 0-9 _ -`);
      const config = app.config(self);
      const progress = app.progress(config);
      const bar = new IngestBar(app.io.stderr, progress.barsEnabled);
      let watched;
      try {
        watched = await watchRun(app, flags.nats ?? app.settings.value('natsUrl') ?? 'nats://127.0.0.1:4222', runId.data, bar.update);
      } finally {
        bar.stop();
        progress.stop();
      }
      const { followed, pipeline, index } = watched;
      const { summary, end } = followed;
      const interrupted = end === null;
      const { documents } = summary;
      if (flags.json === true) {
        app.io.stdout.write(`${JSON.stringify({ run_id: runId.data, state: end?.state ?? 'running', documents, failed: summary.failed, pages: summary.pages, chunks: summary.chunks, seconds: Math.round(summary.seconds * 1000) / 1000, pipeline, index, interrupted })}\n`);
      } else {
        const lines = [
          ...(interrupted ? [`stopped watching: ${documents.total - documents.ok - documents.failed - documents.unchanged} of ${documents.total} documents not ended yet; the run goes on in the workers`] : []),
          `run ${runId.data} (${printable(pipeline)} → ${printable(index)}): ${documents.total} documents: ${documents.ok} indexed, ${documents.failed} failed, ${documents.unchanged} unchanged; ${summary.pages} pages, ${summary.chunks} chunks`,
          ...summary.failed.map((failure) => `  failed ${printable(failure.source)}: [${printable(failure.code)}] ${printable(failure.reason)}`),
        ];
        app.io.stdout.write(`${lines.join('\n')}\n`);
      }
      if (interrupted) throw new ShoalError(ErrorCode.CANCELLED, 'stopped watching');
      if (documents.failed > 0) throw new ShoalError(ErrorCode.PARTIAL_FAILURE, `${documents.failed} of ${documents.total} documents failed; the others are indexed`, { details: { failed: summary.failed } });
    });
}
