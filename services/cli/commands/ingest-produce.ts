import { ErrorCode, ShoalError } from '../../../adapters/protocol/errors.js';
import { RESOURCE_NAME } from '../../../adapters/protocol/documents.js';
import { pipelineByName, resolvePipeline } from '../../../pipelines/documents/builtin.js';
import type { PipelineDefinition } from '../../../pipelines/documents/definition.js';
import { notCarried } from '../../../pipelines/documents/document-producer.js';
import type { IngestSummary } from '../../../pipelines/documents/runner.js';
import type { PendingSource } from '../../../pipelines/documents/sources.js';
import { StoreHealth, type DegradedPeriod } from '../../../pipelines/documents/store-health.js';
import type { CliApp } from '../app.js';
import type { CliConfig } from '../config.js';
import { printable } from '../printable.js';
import { DEFAULT_REJECTS_FILE, RejectsFile } from '../rejects-file.js';
import type { IngestFlagValues, Rejected } from './ingest-flags.js';
import { produceIngest } from './ingest-jobs.js';
import { IngestBar } from './ingest-progress.js';

/**
 * `shoal ingest PATH... --nats URL --index NAME` (NAME one of SHOAL_INDEXES): the sources become
 * document jobs (docs/ingest.md, "Document jobs"). A job names a pipeline and an index, nothing
 * else, so the options that would change the pipeline here (--model, --ocr, --chunk-size...) are
 * refused with the way to get them (a pipeline file on the workers). The summary and exit status
 * are those of an in-process run; `--detach` prints the run id instead of following the run.
 */

type Summaries = {
  human: (summary: IngestSummary, definition: PipelineDefinition, table: string, outages: readonly DegradedPeriod[], interrupted: boolean, rejected: Rejected) => string;
  json: (summary: IngestSummary, definition: PipelineDefinition, table: string, outages: readonly DegradedPeriod[], interrupted: boolean, rejected: Rejected) => string;
};

export interface ProduceIngestCall {
  app: CliApp;
  paths: readonly string[];
  flags: IngestFlagValues;
  config: CliConfig;
  index: string;
  collect: (maxBytes: number, health: StoreHealth, rejects: RejectsFile | null) => Promise<PendingSource[]>;
  summaries: Summaries;
}

/** The pipeline as this machine knows it (built-in or its SHOAL_PIPELINES), for limits and the summary; the workers resolve it themselves. */
async function localDefinition(app: CliApp, name: string, index: string): Promise<PipelineDefinition> {
  let definition: PipelineDefinition;
  try {
    definition = await pipelineByName(name, app.settings.value('pipelinesDir') ?? null);
  } catch {
    // Only the workers know it (their own folder): the built-in defaults stand in here.
    definition = { ...(await resolvePipeline('documents')), name };
  }
  return { ...definition, stages: { ...definition.stages, write: { ...definition.stages.write, index } } };
}

export async function ingestAsJobs(call: ProduceIngestCall): Promise<void> {
  const { app, flags, config } = call;
  const refused: [string, unknown][] = [['--model', flags.model], ['--ocr', flags.ocr], ['--table', flags.table], ['--chunk-size', flags.chunkSize], ['--chunk-overlap', flags.chunkOverlap], ['--force', flags.force], ['--prune', flags.prune]];
  for (const [option, value] of refused) if (value !== undefined && value !== false) throw notCarried(option);
  const pipeline = flags.pipeline ?? 'documents';
  if (!RESOURCE_NAME.test(pipeline)) {
    throw new ShoalError(ErrorCode.INVALID_INPUT, `--pipeline ${printable(pipeline)}: a document job names a pipeline the workers resolve (built-in, or NAME.yaml in their SHOAL_PIPELINES folder), not a file`);
  }
  const definition = await localDefinition(app, pipeline, call.index);
  const rejects = flags.onError === 'skip' ? await RejectsFile.forInput(flags.rejects ?? DEFAULT_REJECTS_FILE, app.io.stdin === process.stdin ? 0 : null) : null;
  const health = new StoreHealth();
  let sources: PendingSource[];
  try {
    sources = await call.collect(definition.stages.parse.maxBytes, health, rejects);
  } finally {
    await rejects?.close();
  }
  const rejected: Rejected = { count: rejects?.count ?? 0, file: rejects?.path ?? null };
  const progress = app.progress(config);
  const bar = new IngestBar(app.io.stderr, progress.barsEnabled && flags.detach !== true);
  let outcome;
  try {
    outcome = await produceIngest({ app, nats: flags.nats ?? '', pipeline, index: call.index, sources, detach: flags.detach === true, quiet: config.quiet, onProgress: bar.update });
  } finally {
    bar.stop();
    progress.stop();
  }
  const { runId, followed } = outcome;
  if (followed === null) {
    const detached = { run_id: runId, documents: sources.length, pipeline, index: call.index, rejected: rejected.count, rejects_file: rejected.count === 0 ? null : rejected.file };
    app.io.stdout.write(flags.json === true ? `${JSON.stringify(detached)}\n` : `run ${runId}: ${sources.length} document jobs published; follow it with: shoal runs watch ${runId}\n`);
    return;
  }
  const interrupted = followed.end === null;
  const { summary } = followed;
  const table = definition.stages.write.table;
  if (flags.json === true) {
    const line = JSON.parse(call.summaries.json(summary, definition, table, health.periods, interrupted, rejected)) as Record<string, unknown>;
    app.io.stdout.write(`${JSON.stringify({ ...line, run_id: runId })}\n`);
  } else {
    app.io.stdout.write(call.summaries.human(summary, definition, table, health.periods, interrupted, rejected));
  }
  if (interrupted) app.io.stderr.write(`only the watching stopped; the workers go on with run ${runId} (follow it again: shoal runs watch ${runId})\n`);
  if (interrupted) throw new ShoalError(ErrorCode.CANCELLED, `interrupted: only the watching stopped; the workers go on with run ${runId} (shoal runs watch ${runId})`);
  if (summary.documents.failed > 0) {
    const { failed, total } = summary.documents;
    throw new ShoalError(ErrorCode.PARTIAL_FAILURE, failed === total ? `all ${total} documents failed; nothing was indexed` : `${failed} of ${total} documents failed; the others are indexed`, { details: { failed: summary.failed } });
  }
  if (rejected.count > 0) throw new ShoalError(ErrorCode.PARTIAL_FAILURE, `${rejected.count} stdin lines were rejected (listed in ${rejected.file ?? ''})`, { details: { rejected: rejected.count, rejects: rejected.file } });
}
