import { constants, existsSync, statSync } from 'node:fs';
import { access } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { Command } from 'commander';
import { S3Store } from '../../../adapters/object-store/index.js';
import { ErrorCode, ShoalError } from '../../../adapters/protocol/errors.js';
import { redactUri } from '../../../adapters/stores/open.js';
import { resolvePipeline } from '../../../pipelines/documents/builtin.js';
import { applyOverrides, modelPathFromCwd, type PipelineDefinition } from '../../../pipelines/documents/definition.js';
import { settleInterrupt, type SettledRun } from '../../../pipelines/documents/interrupted.js';
import { ingestInProcess } from '../../../pipelines/documents/ingest-local.js';
import type { IngestSummary } from '../../../pipelines/documents/runner.js';
import { addRecordSources, fileSources, recordSources, type PendingSource } from '../../../pipelines/documents/sources.js';
import { printable } from '../printable.js';
import { StoreHealth, type DegradedPeriod } from '../../../pipelines/documents/store-health.js';
import type { CliApp } from '../app.js';
import { INDEX_HELP, openIndexRef, parseIndex } from '../index-ref.js';
import { parseFlags } from '../line-options.js';
import { DEFAULT_REJECTS_FILE, RejectsFile } from '../rejects-file.js';
import { IngestFlags, type IngestFlagValues, type Rejected } from './ingest-flags.js';
import { IngestBar } from './ingest-progress.js';

/**
 * `shoal ingest PATH...`: documents (files, folders, or JSON Lines records on stdin) → chunks →
 * vectors → a LanceDB index, with the built-in `documents` pipeline or `--pipeline FILE`.
 * Re-running skips what is already indexed unchanged; the exit status is 0 when every document
 * succeeded and 3 (PARTIAL_FAILURE) when some failed, the others being indexed.
 */

const Collect = (value: string, previous: string[] | undefined): string[] => [...(previous ?? []), value];


/**
 * A local index the run cannot write to is said before any document is parsed or encoded (the
 * first write used to fail with LanceDB's INTERNAL error once all the work was done). The folder,
 * or the nearest folder above it that exists, must be writable.
 */
async function checkIndexWritable(dir: string | null): Promise<void> {
  if (dir === null) return;
  let existing = dir;
  while (!existsSync(existing) && dirname(existing) !== existing) existing = dirname(existing);
  if (existsSync(existing) && !statSync(existing).isDirectory()) return; // openIndex names a file where the folder should be
  try {
    await access(existing, constants.W_OK);
  } catch (error) {
    throw new ShoalError(ErrorCode.CONFIG_INVALID, `cannot write the index ${dir}: ${existing} is not writable (permission denied); choose another --index`, { cause: error });
  }
}

const EXAMPLE = `
Examples:
  $ shoal ingest docs/ --include '**/*.{pdf,md}'
  $ shoal ingest report.pdf notes.md --index ./my-index --model BAAI/bge-small-en-v1.5
  $ cat records.jsonl | shoal ingest -        (lines {"id","text"} or {"id","path"})
  $ shoal ingest docs/ --json | jq .documents
  $ shoal ingest docs/ --prune               (also delete the rows of files no longer in docs/)
  $ shoal ingest docs/ --chunk-size 128 --chunk-overlap 16
  $ cat records.jsonl | shoal ingest - --on-error skip --rejects bad.jsonl
  $ cat records.jsonl | shoal ingest - --metadata-fields title,year   (those fields become filterable metadata)

Exit status: 0 every document indexed (or unchanged), 3 some documents failed (the others are
indexed; each failure is listed with its code and reason) or, with --on-error skip, some stdin
lines were rejected (the others are indexed; each rejected line is in the --rejects file), 2 nothing to ingest (no file found or
selected, no record on stdin), 130/143 interrupted by Ctrl-C/SIGTERM (the summary, with --json
"interrupted": true, counts what finished; the same command again continues), else 1 or 2 as for
every command.`;

async function collectSources(paths: readonly string[], flags: IngestFlagValues, app: CliApp, health: StoreHealth, maxBytes: number, ownIndex: string | null, rejects: RejectsFile | null): Promise<PendingSource[]> {
  const files = paths.filter((path) => path !== '-');
  const fromStdin = paths.includes('-') || (paths.length === 0 && app.io.stdin.isTTY !== true);
  if (paths.length === 0 && !fromStdin) {
    throw new ShoalError(ErrorCode.INVALID_INPUT, 'name files or folders to ingest, or pipe JSON Lines records on stdin (see --help)');
  }
  if (flags.metadataFields !== undefined && !fromStdin) throw new ShoalError(ErrorCode.INVALID_INPUT, '--metadata-fields lifts fields of the JSON Lines records read from stdin: give - (and pipe the records), or leave it out (files get title, mtime, size and mime by themselves)');
  const selection = { include: flags.include ?? [], exclude: flags.exclude ?? [] };
  // Links are followed here (a user's own folders); the run's own index is never walked into (`shoal ingest .`).
  const walking = { hidden: flags.hidden === true, followLinks: true, skip: ownIndex === null ? [] : [ownIndex] };
  const out = await fileSources(files, { ...selection, ...walking, maxBytes, s3: () => new S3Store(app.settings.s3, health.s3) });
  if (fromStdin) {
    // Every record is read before the run starts: an interrupt while the producer still writes
    // (or holds the pipe open) ends the read at once, instead of waiting out the stop deadline.
    const stopReading = (): void => {
      app.io.stdin.destroy(new ShoalError(ErrorCode.CANCELLED, 'interrupted while reading records from stdin'));
    };
    app.io.signal.addEventListener('abort', stopReading, { once: true });
    let records: Awaited<ReturnType<typeof recordSources>>;
    try {
      records = await recordSources(app.io.stdin, process.cwd(), maxBytes, { ...(rejects === null ? {} : { onReject: rejects.add }), ...(flags.metadataFields === undefined ? {} : { metadataFields: flags.metadataFields }) });
    } finally {
      app.io.signal.removeEventListener('abort', stopReading);
    }
    addRecordSources(out, records, { record: 'stdin record id', file: 'given on the command line' });
  }
  // Nothing found is almost always a wrong folder, glob or empty pipe: say so instead of a "0 documents" success.
  // With --prune an emptied folder is a case of its own, warned about by the prune step (nothing is deleted).
  if (out.length === 0 && flags.prune !== true) throw new ShoalError(ErrorCode.INVALID_INPUT, `nothing to ingest: ${nothingFound(files, fromStdin, selection, rejects)} (see shoal ingest --help)`);
  return out;
}

function nothingFound(files: readonly string[], fromStdin: boolean, selection: { include: readonly string[]; exclude: readonly string[] }, rejects: RejectsFile | null): string {
  const globs = [...selection.include.map((glob) => `--include '${glob}'`), ...selection.exclude.map((glob) => `--exclude '${glob}'`)];
  const where = files.length === 0 ? '' : `${globs.length === 0 ? 'no files in' : `no files selected by ${globs.map(printable).join(' ')} in`} ${files.map(printable).join(', ')}`;
  const rejected = rejects === null || rejects.count === 0 ? '' : `every stdin line was rejected (${rejects.count}, listed in ${printable(rejects.path)})`;
  const stdin = fromStdin ? rejected || 'no JSON Lines records on stdin' : '';
  return [where, stdin].filter((part) => part !== '').join(' and ');
}

/** How long a store failed, for the summary line (`open` while it still fails at the end). */
function outageLine(period: DegradedPeriod): string {
  const seconds = ((period.until === null ? Date.now() : Date.parse(period.until)) - Date.parse(period.since)) / 1000;
  return `  degraded: ${period.store} unavailable for ${seconds.toFixed(1)} s from ${period.since}${period.until === null ? ' (still failing)' : ''} (retried, nothing lost): ${printable(period.reason)}`;
}

/** Said first when the run was stopped: the counts below are what finished before the stop. */
function interruptedLine(summary: IngestSummary): string {
  const { total, ok, failed, unchanged } = summary.documents;
  const left = total - ok - failed - unchanged;
  return `interrupted: ${left} of ${total} documents not done; what finished is kept, and running the same command again continues where it stopped`;
}

/**
 * `table` is the one the rows went to (openIndex's answer): a table named in the URI
 * (`?table=T`, `chroma://host/COLLECTION`) wins over `--table`, which the definition holds.
 */

function rejectedLine(rejected: Rejected): string[] {
  return rejected.count === 0 ? [] : [`  rejected ${rejected.count} stdin ${rejected.count === 1 ? 'line' : 'lines'} (--on-error skip), each with its line number and reason in ${printable(rejected.file ?? '')}`];
}

function humanSummary(summary: IngestSummary, definition: PipelineDefinition, table: string, outages: readonly DegradedPeriod[], interrupted: boolean, rejected: Rejected): string {
  const { documents } = summary;
  const lines = [
    ...(interrupted ? [interruptedLine(summary)] : []),
    `${documents.total} documents: ${documents.ok} indexed, ${documents.failed} failed, ${documents.unchanged} unchanged; ` +
      `${summary.pages} pages (${summary.ocrPages} OCR), ${summary.chunks} chunks in ${summary.seconds.toFixed(1)} s ` +
      `→ ${redactUri(definition.stages.write.index)} (table ${table})`,
    ...summary.failed.map((failure) => `  failed ${printable(failure.source)}: [${printable(failure.code)}] ${printable(failure.reason)}`),
    ...rejectedLine(rejected),
    ...(summary.removed === undefined ? [] : [`  removed ${summary.removed} documents no longer in their folder (--prune)`]),
    ...outages.map(outageLine),
  ];
  return `${lines.join('\n')}\n`;
}

function jsonSummary(summary: IngestSummary, definition: PipelineDefinition, table: string, outages: readonly DegradedPeriod[], interrupted: boolean, rejected: Rejected): string {
  return `${JSON.stringify({
    documents: summary.documents,
    failed: summary.failed,
    pages: summary.pages,
    ocr_pages: summary.ocrPages,
    chunks: summary.chunks,
    seconds: Math.round(summary.seconds * 1000) / 1000,
    index: redactUri(definition.stages.write.index),
    table,
    pipeline: definition.name,
    // Documents deleted by --prune (0 without it).
    removed: summary.removed ?? 0,
    // Each stretch a store (S3, the index) failed and the run waited on it: {store, reason, since, until}.
    outages,
    // Stopped by SIGINT/SIGTERM (exit 130/143): the counts are what finished before the stop; a re-run continues.
    interrupted,
    // Stdin lines left out by --on-error skip (0 otherwise), and the file that lists them (null when none).
    rejected: rejected.count,
    rejects_file: rejected.count === 0 ? null : rejected.file,
    // The chunking the run used (--chunk-size / --chunk-overlap or the pipeline's), in tokens.
    chunk: definition.stages.chunk,
  })}\n`;
}

export function registerIngest(program: Command, app: CliApp): void {
  program
    .command('ingest')
    .summary('documents → chunks → vectors → a searchable index')
    .description('Parse, chunk, embed and index documents (PDF, text, Markdown, HTML, images) into LanceDB.')
    .argument('[paths...]', "files, folders (recursive) or s3://bucket/prefix; '-' or none with piped stdin: JSON Lines records")
    .option('--pipeline <name|file>', 'pipeline: a built-in name, a name in the SHOAL_PIPELINES folder, or a YAML/JSON file (default: documents)')
    .option('-m, --model <model>', "encode stage's model (default: the pipeline's, sentence-transformers/all-MiniLM-L6-v2)")
    .option('--index <uri>', `${INDEX_HELP} (default: the pipeline's, ./shoal-index)`)
    .option('--table <name>', 'table in the index (default: chunks)')
    .option('--include <glob>', 'only files matching (relative to the folder; repeatable)', Collect)
    .option('--exclude <glob>', 'skip files matching (repeatable)', Collect)
    .option('--hidden', 'also walk files and folders whose names start with a dot (.git, .env: skipped by default)')
    .option('--ocr <mode>', 'auto (pages without usable text), always or never')
    .option('--force', 'redo every document, even unchanged ones')
    .option('--prune', 'after the run, delete from the index the documents of the given folders or s3:// prefixes that are no longer there')
    .option('--nats <url>', 'fan the pipeline out over NATS JetStream: parse and encode on `shoal worker` processes (see docs/ingest.md)')
    .option('--chunk-size <n>', "chunk size in the encoder's tokens, 8 to 8192 (default: the pipeline's, 200); a changed size re-indexes")
    .option('--chunk-overlap <n>', 'tokens repeated between chunks, below the size (default: the pipeline\'s, or min(32, size/4) with --chunk-size)')
    .option('--on-error <mode>', 'stdin records: fail (default: a bad line stops the run before anything is indexed) or skip (bad lines go to --rejects, the others are indexed, exit 3)')
    .option('--metadata-fields <a,b>', 'stdin records: top-level fields moved into the record\'s metadata (stored with its chunks, filterable as metadata.<field>); other unknown fields are still refused')
    .option('--rejects <file>', `with --on-error skip: the JSON Lines file of rejected lines (default: ./${DEFAULT_REJECTS_FILE}, replaced when a line is rejected)`)
    .option('--detach', 'with --nats and --index NAME: publish the document jobs, print the run id and exit (follow it with `shoal runs watch RUN`)')
    .option('--json', 'print the summary as one JSON object on stdout')
    .addHelpText('after', EXAMPLE)
    .action(async (paths: string[], _options: unknown, self: Command) => {
      const flags = parseFlags(IngestFlags, self);
      if (flags.rejects !== undefined && flags.onError !== 'skip') throw new ShoalError(ErrorCode.INVALID_INPUT, '--rejects names the file of lines skipped by --on-error skip: give --on-error skip too, or leave --rejects out');
      if (flags.chunkSize !== undefined && flags.chunkOverlap !== undefined && flags.chunkOverlap >= flags.chunkSize) {
        throw new ShoalError(ErrorCode.INVALID_INPUT, `--chunk-overlap ${flags.chunkOverlap} must be smaller than --chunk-size ${flags.chunkSize}`);
      }
      const config = app.config(self);
      // --nats with --index naming one of SHOAL_INDEXES: a producer of document jobs, not a coordinator.
      const jobsIndex = flags.nats !== undefined && flags.index !== undefined && Object.hasOwn(app.settings.indexes ?? {}, flags.index) ? flags.index : null;
      if (flags.detach === true && jobsIndex === null) {
        throw new ShoalError(ErrorCode.INVALID_INPUT, '--detach publishes document jobs: give --nats URL and --index NAME, NAME one of SHOAL_INDEXES (the index the workers write)');
      }
      if (jobsIndex !== null) {
        await (await import('./ingest-produce.js')).ingestAsJobs({ app, paths, flags, config, index: jobsIndex, collect: (maxBytes, health, rejects) => collectSources(paths, flags, app, health, maxBytes, null, rejects), summaries: { human: humanSummary, json: jsonSummary } });
        return;
      }
      const definition = applyOverrides(await resolvePipeline(flags.pipeline, app.settings.value('pipelinesDir') ?? null), {
        model: flags.model === undefined ? undefined : modelPathFromCwd(flags.model),
        ocr: flags.ocr,
        index: flags.index,
        table: flags.table,
        chunkSize: flags.chunkSize,
        chunkOverlap: flags.chunkOverlap,
      });
      const rejects = flags.onError === 'skip' ? await RejectsFile.forInput(flags.rejects ?? DEFAULT_REJECTS_FILE, app.io.stdin === process.stdin ? 0 : null) : null;
      // Whether S3 (sources) and the index answer: the run waits on a failing one, and says so.
      const health = new StoreHealth();
      // The index parsed once (a bad --index refused before any work); its local folder, if it has
      // one, is never walked into and is checked writable before any work.
      const indexRef = parseIndex(app, definition.stages.write.index, definition.stages.write.table);
      const indexDir = indexRef.localDir;
      let sources: PendingSource[];
      try {
        sources = await collectSources(paths, flags, app, health, definition.stages.parse.maxBytes, indexDir, rejects);
      } finally {
        await rejects?.close();
      }
      const rejected: Rejected = { count: rejects?.count ?? 0, file: rejects?.path ?? null };
      // Known before the run: files and stdin records are never roots (imported only when asked for).
      const pruning = flags.prune === true ? await import('./ingest-prune.js') : null;
      const roots = pruning === null ? [] : await pruning.pruneRoots(paths);
      const progress = app.progress(config);
      const bar = new IngestBar(app.io.stderr, progress.barsEnabled);
      health.onChange((store, degraded) => {
        bar.degraded(health.failingStores());
        // With a bar the mark is on it; otherwise one line per change (not silenced by --quiet: a run that waits must say why).
        if (progress.barsEnabled) return;
        const failing = health.failingStores().includes(store);
        app.io.stderr.write(failing && degraded !== null ? `warning: degraded since ${degraded.since}: ${printable(degraded.reason)}\n` : `${store} answers again; ${degraded === null ? 'no store is failing' : printable(degraded.reason)}\n`);
      });
      await checkIndexWritable(indexDir);
      const { store: sink, table } = openIndexRef(app, indexRef, health.sinkObserver());
      const ingestAll = async (): Promise<IngestSummary> => flags.nats !== undefined
        ? await (await import('./ingest-nats.js')).ingestOverNats({ app, nats: flags.nats, definition, sink, sources, force: flags.force === true, onProgress: bar.update, quiet: config.quiet, health })
        : await app.withEngine(config, progress, async (engine) =>
          await ingestInProcess({ definition, engine, sink, sources, force: flags.force === true, signal: app.io.signal, onProgress: bar.update, onPage: bar.page }),
        );
      let run: SettledRun;
      try {
        // An interrupt settles with the summary of what finished before it: written below, then rethrown (exit 130/143).
        run = await settleInterrupt(ingestAll());
        // Not after an interrupt: the documents not reached were not seen, which must not read as removed.
        if (pruning !== null && run.interrupted === null) {
          run = { ...run, summary: await pruning.pruneAfterRun({ app, sink, roots, sources, summary: run.summary, globs: { include: flags.include ?? [], exclude: flags.exclude ?? [] } }) };
        }
      } finally {
        bar.stop();
        progress.stop();
        await sink.close();
      }
      const outages = health.periods;
      const { summary, interrupted } = run;
      const stopped = interrupted !== null;
      app.io.stdout.write(flags.json === true ? jsonSummary(summary, definition, table, outages, stopped, rejected) : humanSummary(summary, definition, table, outages, stopped, rejected));
      // Unchanged: main.ts maps it to 130/143, whatever failed before the stop.
      if (interrupted !== null) throw interrupted;
      if (summary.documents.failed > 0) {
        const { failed, total } = summary.documents;
        throw new ShoalError(ErrorCode.PARTIAL_FAILURE, failed === total ? `${failed === 1 ? 'the document' : `all ${total} documents`} failed; nothing was indexed` : `${failed} of ${total} documents failed; the others are indexed`, {
          details: { failed: summary.failed },
        });
      }
      if (rejected.count > 0) {
        const lines = `${rejected.count} stdin ${rejected.count === 1 ? 'line was' : 'lines were'} rejected`;
        throw new ShoalError(ErrorCode.PARTIAL_FAILURE, `${lines} (listed in ${rejected.file ?? ''}); the ${summary.documents.total} documents read are indexed`, { details: { rejected: rejected.count, rejects: rejected.file } });
      }
    });
}
