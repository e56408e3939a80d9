import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { Readable } from 'node:stream';
import { parseArgs } from 'node:util';
import { spawn } from 'node:child_process';
import { connectNats } from '../adapters/nats/connection/connection.js';
import { LanceDbStore } from '../adapters/stores/lancedb/store.js';
import { NatsIngest } from '../pipelines/documents/nats-ingest.js';
import { startNatsServer } from '../test/helpers/nats-server.js';
import { resolvePipeline } from '../pipelines/documents/builtin.js';
import { chunkPages, encoderTokenLimit, engineTokenCounter, type ChunkSettings } from '../pipelines/documents/chunk.js';
import { applyOverrides, type PipelineDefinition } from '../pipelines/documents/definition.js';
import { DocumentParser } from '../pipelines/documents/parse.js';
import { IngestRunner, type IngestStage, type IngestSummary } from '../pipelines/documents/runner.js';
import { fileSources, recordSources, type PendingSource } from '../pipelines/documents/sources.js';
import { InferenceEngine } from '../pipelines/inference/engine.js';
import type { BatchEvent } from '../pipelines/inference/scheduler-options.js';
import { engineOptionsFromEnv } from '../services/settings/engine-settings.js';
import { BENCH_MODEL, DATA_DIR } from './lib/corpora.js';
import { JobsFleet, jobsRow, jobsVerdict } from './lib/document-jobs.js';
import { percentile, printTable, writeResult, type Row } from './lib/report.js';

/**
 * `shoal ingest` speed, in process, through the same runner the CLI uses (IngestRunner with the
 * built-in `documents` pipeline, DocumentParser, LanceDbStore), with bench-minilm-l6 (real
 * all-MiniLM-L6-v2 geometry, random weights) as the encoder and the built-in OCR:
 *
 * 1. SciFact abstracts as JSON Lines records `{"id","text": title + "\n\n" + abstract}` into a
 *    fresh LanceDB index (temp dir) per round: documents/s, chunks/s, and the share of wall time
 *    per stage from the runner's `onStage` hook (parse and chunk are summed per document, two in
 *    flight, so they may overlap encode; `wait` is the time the main loop stalled for intake).
 * 2. Baseline, interleaved with (1) round by round (order alternating): encode-only of exactly the
 *    same chunk texts, produced once up front by the pipeline's own parser and chunker, through
 *    `InferenceEngine.encode` as the encode stage calls it (role document, dense, priority bulk,
 *    the model's default max length, requests of up to 8,192 items). The pipeline / encode-only
 *    chunks/s ratio is reported per round and as the median (issue target ≥ 0.9).
 * 3. The PDFs of ../shared/data/pdfs (OCR auto, 16 files, the encrypted one fails by design):
 *    documents/s, pages/s, OCR pages and chunks/s, once per round.
 *
 * One engine (environment settings, as `shoal ingest`) and one parser (its threads started by a
 * warm-up) serve every round; the model is loaded before timing. Absolute figures depend on the
 * machine; the ratio is measured in the same run.
 *
 * 4. With `--nats`: the same SciFact records through `shoal ingest --nats` (NatsIngest, the CLI's
 *    coordinator, in this process) with one `shoal worker --parse` child process on a private
 *    nats-server (parse tasks, then encode jobs of 64-chunk parts), once per round after the
 *    in-process run, on the same records: documents/s, chunks/s, the in-process / NATS ratio and
 *    each mode's stage shares. Both indexes' rows are counted before they are removed and must
 *    equal each other and the chunks (the bench fails otherwise). `--nats-docs N` runs a subset
 *    over NATS when the whole set would take too long; `--skip-baseline` leaves out (2) only,
 *    which the in-process / NATS ratio does not need (the full 5,183-abstract run uses it).
 *
 * 5. With `--jobs`: the same SciFact records as document jobs (issue 35; bench/lib/document-jobs.ts):
 *    a private nats-server, one `shoal worker --models bench-minilm-l6` child process with the
 *    in-process engine's intra-op threads (SHOAL_THREADS, set for both when unset), and per
 *    configuration (`--jobs-workers 1,2`) that many `shoal worker --documents` processes; this
 *    process publishes with DocumentProducer (what `shoal ingest --nats --index NAME` runs) and
 *    follows the run: timed from the first publish to the run's end event. Each configuration
 *    runs once per round, interleaved with the in-process run (order reversed every other round),
 *    into a fresh index; rows are counted and must equal the in-process run's (the bench fails
 *    otherwise). Reported per round and as medians: documents/s, chunks/s, jobs / in-process,
 *    the engines' items per batch, and CPU seconds per process (/proc) against the wall time of all cores.
 *    `--docs` defaults to 2,000 with `--jobs`.
 *
 *   npx tsx bench/ingest.ts [--rounds 3] [--docs 1000] [--skip-pdfs] [--skip-baseline] [--nats] [--nats-docs N] [--jobs] [--jobs-workers 1,2]
 */

const { values: args } = parseArgs({
  options: {
    rounds: { type: 'string', default: '3' },
    docs: { type: 'string' },
    'skip-pdfs': { type: 'boolean', default: false },
    'skip-baseline': { type: 'boolean', default: false },
    nats: { type: 'boolean', default: false },
    'nats-docs': { type: 'string' },
    jobs: { type: 'boolean', default: false },
    'jobs-workers': { type: 'string', default: '1,2' },
  },
});

const ROUNDS = Number(args.rounds);
const DOCS = Number(args.docs ?? (args.jobs ? 2000 : 1000));
const PDF_DIR = join(DATA_DIR, 'pdfs');
/** Same request size as pipelines/documents/stages/encode.ts. */
const ENCODE_REQUEST_ITEMS = 8_192;
const STAGES: readonly IngestStage[] = ['parse', 'chunk', 'encode', 'write', 'wait'];
const NATS_DOCS = args['nats-docs'] === undefined ? DOCS : Number(args['nats-docs']);
const NATS_PREFIX = 'benchingest';
/** Documents workers per `--jobs` configuration. */
const JOBS_WORKERS = args.jobs ? (args['jobs-workers'] ?? '1,2').split(',').map(Number) : [];
/** Batches the in-process engine ran and their items (its scheduler's onBatch hook). */
const inference = { batches: 0, items: 0, realTokens: 0, paddedTokens: 0 };

interface Scifact {
  _id: string;
  title: string;
  text: string;
}

function scifactLines(count: number): string[] {
  return readFileSync(join(DATA_DIR, 'scifact', 'corpus.jsonl'), 'utf8')
    .split('\n')
    .filter((line) => line.trim() !== '')
    .slice(0, count)
    .map((line) => {
      const doc = JSON.parse(line) as Scifact;
      return JSON.stringify({ id: doc._id, text: `${doc.title}\n\n${doc.text}` });
    });
}

function recordsOf(lines: readonly string[]): Promise<PendingSource[]> {
  return recordSources(Readable.from([`${lines.join('\n')}\n`]), process.cwd());
}

interface PipelineRun {
  summary: IngestSummary;
  seconds: number;
  stages: Record<IngestStage, number>;
  /** Rows in the index after the run, counted before the temp index is removed (both modes must agree). */
  rows: number;
  /** In process only: the engine's batches and their items, and this process's CPU seconds (all threads). */
  batches?: number;
  batchItems?: number;
  realTokens?: number;
  paddedTokens?: number;
  cpuSeconds?: number;
}

async function runPipeline(engine: InferenceEngine, parser: DocumentParser, base: PipelineDefinition, sources: readonly PendingSource[]): Promise<PipelineRun> {
  const dir = mkdtempSync(join(tmpdir(), 'shoal-bench-ingest-'));
  const definition = applyOverrides(base, { index: dir });
  const sink = new LanceDbStore({ dir, table: definition.stages.write.table });
  const stages = Object.fromEntries(STAGES.map((stage) => [stage, 0])) as Record<IngestStage, number>;
  try {
    const runner = new IngestRunner({ definition, engine, sink, reader: parser, onStage: (stage, ms) => (stages[stage] += ms / 1000) });
    const before = { ...inference };
    const cpu = process.cpuUsage();
    const started = performance.now();
    const summary = await runner.run(sources);
    const seconds = (performance.now() - started) / 1000;
    const used = process.cpuUsage(cpu);
    return { summary, seconds, stages, rows: await sink.count(), batches: inference.batches - before.batches, batchItems: inference.items - before.items, realTokens: inference.realTokens - before.realTokens, paddedTokens: inference.paddedTokens - before.paddedTokens, cpuSeconds: (used.user + used.system) / 1e6 };
  } finally {
    await sink.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** A private nats-server, one `shoal worker --parse` child process serving the bench model, and the coordinator. */
async function startNats(): Promise<{ ingest: NatsIngest; stop: () => Promise<void> }> {
  const server = await startNatsServer();
  const worker = spawn(process.execPath, [join(import.meta.dirname, '..', 'bin', 'shoal.js'), 'worker', '--parse', '--models', basename(BENCH_MODEL), '--nats', server.url, '--prefix', NATS_PREFIX], {
    // The sources (a stale dist/ may predate the parse role).
    // Served by name from its folder: model names over NATS are never paths.
    env: { ...process.env, SHOAL_FROM_SOURCE: '1', SHOAL_LOG_LEVEL: 'warn', SHOAL_MODEL_DIR: dirname(BENCH_MODEL) },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  let stopping = false;
  worker.once('exit', (code) => {
    if (stopping) return;
    console.error(`the worker exited with ${String(code)} during the bench`);
    process.exit(1);
  });
  const nc = await connectNats({ servers: [server.url], retryFirstConnect: false });
  const ingest = await NatsIngest.open(nc, { prefix: NATS_PREFIX });
  return {
    ingest,
    stop: async () => {
      stopping = true;
      await ingest.close();
      await nc.close();
      worker.kill('SIGTERM');
      await new Promise((resolve) => (worker.exitCode === null ? worker.once('exit', resolve) : resolve(undefined)));
      await server.stop();
    },
  };
}

async function runNatsPipeline(ingest: NatsIngest, base: PipelineDefinition, sources: readonly PendingSource[]): Promise<PipelineRun> {
  const dir = mkdtempSync(join(tmpdir(), 'shoal-bench-ingest-nats-'));
  const definition = applyOverrides(base, { index: dir, model: basename(BENCH_MODEL) });
  const sink = new LanceDbStore({ dir, table: definition.stages.write.table });
  const stages = Object.fromEntries(STAGES.map((stage) => [stage, 0])) as Record<IngestStage, number>;
  try {
    const started = performance.now();
    const summary = await ingest.run({ definition, sink, index: dir, onStage: (stage, ms) => (stages[stage] += ms / 1000) }, sources);
    const seconds = (performance.now() - started) / 1000;
    return { summary, seconds, stages, rows: await sink.count() };
  } finally {
    await sink.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The chunk texts the pipeline encodes, from its own parser and chunker (same settings logic as the runner). */
async function pipelineChunks(engine: InferenceEngine, parser: DocumentParser, definition: PipelineDefinition, sources: readonly PendingSource[]): Promise<string[]> {
  const { model } = definition.stages.encode;
  const limit = await encoderTokenLimit(engine, model);
  const { size, overlap } = definition.stages.chunk;
  const settings: ChunkSettings = limit === null || limit >= size ? { size, overlap } : { size: limit, overlap: Math.min(overlap, Math.floor(limit / 4)) };
  const count = engineTokenCounter(engine, model);
  const texts: string[] = [];
  for (const pending of sources) {
    const { source } = await pending.load();
    const outcome = await parser.parse(source);
    if (!outcome.ok) throw new Error(`${pending.uri}: ${outcome.code} ${outcome.reason}`);
    for (const chunk of await chunkPages(outcome.document.pages, settings, count)) texts.push(chunk.text);
  }
  return texts;
}

async function encodeOnly(engine: InferenceEngine, definition: PipelineDefinition, texts: readonly string[]): Promise<number> {
  const { model, normalize } = definition.stages.encode;
  const started = performance.now();
  for (let at = 0; at < texts.length; at += ENCODE_REQUEST_ITEMS) {
    const slice = texts.slice(at, at + ENCODE_REQUEST_ITEMS);
    const result = await engine.encode({
      model,
      items: slice.map((text) => ({ text })),
      output_types: ['dense'],
      role: 'document',
      ...(normalize === undefined ? {} : { normalize }),
      priority: 'bulk',
    });
    if (result.items.length !== slice.length) throw new Error(`encode-only: ${result.items.length} vectors for ${slice.length} texts`);
  }
  return (performance.now() - started) / 1000;
}

function markdown(title: string, rows: readonly Row[]): string {
  if (rows.length === 0) return '';
  const columns = Object.keys(rows[0] ?? {});
  const cell = (value: string | number | undefined): string =>
    typeof value === 'number' ? (Number.isInteger(value) ? String(value) : value.toFixed(value < 10 ? 3 : 1)) : String(value ?? '');
  return [`### ${title}`, '', `| ${columns.join(' | ')} |`, `| ${columns.map(() => '---').join(' | ')} |`, ...rows.map((row) => `| ${columns.map((c) => cell(row[c])).join(' | ')} |`), ''].join('\n');
}

const median = (values: readonly number[]): number => percentile(values, 50);
const pct = (part: number, whole: number): number => (whole > 0 ? (100 * part) / whole : Number.NaN);

function verdictLine(ratio: number): string {
  // With --skip-baseline there is no encode-only side, so no ratio to judge.
  if (args['skip-baseline']) return 'pipeline / encode-only: not measured (--skip-baseline)';
  return `pipeline / encode-only (median of ${ROUNDS} rounds): ${ratio.toFixed(3)} — target ≥ 0.9: ${ratio >= 0.9 ? 'met' : 'NOT met'}`;
}

function stageColumns(run: PipelineRun): Row {
  const row: Row = {};
  for (const stage of STAGES) row[`${stage} %`] = pct(run.stages[stage], run.seconds);
  return row;
}

async function main(): Promise<void> {
  // The model worker of --jobs must run with the in-process engine's intra-op threads: both get the same explicit number.
  const threads = Number(process.env.SHOAL_THREADS ?? availableParallelism());
  if (args.jobs) process.env.SHOAL_THREADS = String(threads);
  const onBatch = (event: BatchEvent): void => {
    inference.batches += 1;
    inference.items += event.items;
    inference.realTokens += event.realTokens;
    inference.paddedTokens += event.paddedTokens;
  };
  const engine = new InferenceEngine({ ...engineOptionsFromEnv(process.env), hooks: { scheduler: { onBatch } } });
  const base = applyOverrides(await resolvePipeline(undefined), { model: BENCH_MODEL });
  const parser = new DocumentParser(engine, { ...base.stages.parse });
  const lines = scifactLines(DOCS);
  const pdfFiles = readdirSync(PDF_DIR).filter((name) => name.endsWith('.pdf'));
  const nats = args.nats ? await startNats() : null;
  const jobIndex = (round: number | 'warm', workers: number): string => `r${round}w${workers}`;
  const fleet = args.jobs ? await JobsFleet.start({ configurations: JOBS_WORKERS, threads, pipeline: base, indexes: [...JOBS_WORKERS.map((workers) => jobIndex('warm', workers)), ...Array.from({ length: ROUNDS }, (_, n) => JOBS_WORKERS.map((workers) => jobIndex(n + 1, workers))).flat()] }) : null;
  try {
    if (nats !== null) await runNatsPipeline(nats.ingest, base, await recordsOf(lines.slice(0, 8)));
    // Warm-up of every documents worker (parse threads, pipeline, index handle): a batch of 64 each, and some.
    for (const workers of JOBS_WORKERS) await fleet?.run(workers, jobIndex('warm', workers), await recordsOf(lines.slice(0, Math.min(lines.length, 64 * workers + 32))));
    // Warm-up: parse threads, tokenizer and encoder loaded, OCR model loaded (one PDF page routed to OCR, if any).
    const warm = await recordsOf(lines.slice(0, 8));
    await runPipeline(engine, parser, base, warm);
    console.error('preparing the chunk texts with the pipeline chunker…');
    const texts = args['skip-baseline'] ? [] : await pipelineChunks(engine, parser, base, await recordsOf(lines));
    await encodeOnly(engine, base, texts.slice(0, 64));
    if (!args['skip-pdfs']) await runPipeline(engine, parser, base, await fileSources(pdfFiles.slice(0, 2).map((name) => join(PDF_DIR, name))));

    const scifactRows: Row[] = [];
    const pdfRows: Row[] = [];
    const rounds: unknown[] = [];
    const ratios: number[] = [];
    const natsRows: Row[] = [];
    const jobsRows = new Map<number, Row[]>(JOBS_WORKERS.map((workers) => [workers, []]));
    for (let round = 1; round <= ROUNDS; round++) {
      const sources = await recordsOf(lines);
      let pipeline: PipelineRun | undefined;
      let baseline = Number.NaN;
      const jobs = new Map<number, Awaited<ReturnType<JobsFleet['run']>>>();
      // Alternate the order so drift within a round does not favour one side.
      const sides = ['pipeline', ...(args['skip-baseline'] ? [] : ['baseline']), ...JOBS_WORKERS.map((workers) => `jobs${workers}`)];
      for (const side of round % 2 === 1 ? sides : sides.reverse()) {
        if (side === 'pipeline') pipeline = await runPipeline(engine, parser, base, sources);
        else if (side === 'baseline') baseline = await encodeOnly(engine, base, texts);
        else if (fleet !== null) {
          const workers = Number(side.slice('jobs'.length));
          jobs.set(workers, await fleet.run(workers, jobIndex(round, workers), await recordsOf(lines)));
          fleet.removeIndex(jobIndex(round, workers));
        }
      }
      if (pipeline === undefined) throw new Error('no pipeline run');
      for (const [workers, run] of jobs) {
        const row = jobsRow(round, workers, pipeline, run, lines.length);
        jobsRows.get(workers)?.push(row);
        console.error(`round ${round}: jobs with ${workers} documents worker(s) ${Number(row['jobs docs/s']).toFixed(1)} docs/s, in process ${Number(row['in-process docs/s']).toFixed(1)} docs/s, jobs/in-process ${Number(row['jobs/in-process']).toFixed(3)}`);
      }
      const { summary } = pipeline;
      if ((!args['skip-baseline'] && summary.chunks !== texts.length) || summary.documents.ok !== lines.length || pipeline.rows !== summary.chunks) {
        throw new Error(`round ${round}: pipeline wrote ${summary.chunks} chunks of ${summary.documents.ok} documents; encode-only has ${texts.length} chunks of ${lines.length}`);
      }
      const pipelineRate = summary.chunks / pipeline.seconds;
      const baselineRate = texts.length / baseline;
      ratios.push(pipelineRate / baselineRate);
      scifactRows.push({
        round,
        docs: summary.documents.ok,
        chunks: summary.chunks,
        'pipeline s': pipeline.seconds,
        'docs/s': summary.documents.ok / pipeline.seconds,
        'chunks/s': pipelineRate,
        'encode-only s': baseline,
        'encode-only chunks/s': baselineRate,
        'pipeline/encode-only': pipelineRate / baselineRate,
        ...stageColumns(pipeline),
      });
      console.error(`round ${round}: pipeline ${pipelineRate.toFixed(1)} chunks/s, encode-only ${baselineRate.toFixed(1)} chunks/s, ratio ${(pipelineRate / baselineRate).toFixed(3)}`);

      if (nats !== null) {
        const subset = await recordsOf(lines.slice(0, NATS_DOCS));
        // The in-process figure over the same subset (the whole run's when it is the whole set).
        const local = NATS_DOCS >= lines.length ? pipeline : await runPipeline(engine, parser, base, subset);
        const remote = await runNatsPipeline(nats.ingest, base, subset);
        const s = remote.summary;
        if (s.documents.ok !== subset.length || s.chunks !== local.summary.chunks || remote.rows !== local.rows || remote.rows !== s.chunks) {
          throw new Error(`round ${round}: NATS wrote ${s.chunks} chunks (${remote.rows} rows) of ${s.documents.ok} documents, in process ${local.summary.chunks} chunks (${local.rows} rows)`);
        }
        const localRate = local.summary.documents.ok / local.seconds;
        const remoteRate = s.documents.ok / remote.seconds;
        natsRows.push({
          round,
          docs: s.documents.ok,
          chunks: s.chunks,
          'in-process rows': local.rows,
          'NATS rows': remote.rows,
          'in-process chunks/s': local.summary.chunks / local.seconds,
          'in-process s': local.seconds,
          'NATS s': remote.seconds,
          'in-process docs/s': localRate,
          'NATS docs/s': remoteRate,
          'NATS chunks/s': s.chunks / remote.seconds,
          'in-process / NATS': localRate / remoteRate,
          ...stageColumns(remote),
          ...Object.fromEntries(Object.entries(stageColumns(local)).map(([key, value]) => [`in-process ${key}`, value])),
        });
        console.error(`round ${round}: NATS ${remoteRate.toFixed(1)} docs/s, in process ${localRate.toFixed(1)} docs/s, ratio ${(localRate / remoteRate).toFixed(3)}`);
      }

      let pdf: PipelineRun | null = null;
      if (!args['skip-pdfs']) {
        pdf = await runPipeline(engine, parser, base, await fileSources([PDF_DIR], { include: ['*.pdf'] }));
        const s = pdf.summary;
        pdfRows.push({
          round,
          documents: s.documents.total,
          ok: s.documents.ok,
          failed: s.documents.failed,
          pages: s.pages,
          'ocr pages': s.ocrPages,
          chunks: s.chunks,
          seconds: pdf.seconds,
          'docs/s': s.documents.total / pdf.seconds,
          'pages/s': s.pages / pdf.seconds,
          'chunks/s': s.chunks / pdf.seconds,
          ...stageColumns(pdf),
        });
        console.error(`round ${round}: PDFs ${s.pages} pages (${s.ocrPages} OCR) in ${pdf.seconds.toFixed(1)} s`);
      }
      rounds.push({ round, scifact: { ...pipeline, baselineSeconds: baseline }, pdfs: pdf });
    }

    const medianRow = (rows: readonly Row[]): Row => {
      const out: Row = { round: 'median' };
      for (const key of Object.keys(rows[0] ?? {})) {
        // Text columns (documents per worker) have no median.
        if (key !== 'round') out[key] = rows.every((r) => typeof r[key] === 'number') ? median(rows.map((r) => Number(r[key]))) : '';
      }
      return out;
    };
    const scifactTable = [...scifactRows, medianRow(scifactRows)];
    const ratio = median(ratios);
    printTable(`SciFact abstracts (${lines.length} JSON Lines records) → LanceDB, pipeline vs encode-only of the same ${texts.length} chunks (stage % = busy time / wall)`, scifactTable);
    console.log(`\n${verdictLine(ratio)}`);
    const pdfTable = pdfRows.length === 0 ? [] : [...pdfRows, medianRow(pdfRows)];
    printTable(`PDFs of ${PDF_DIR} (OCR auto)`, pdfTable);
    const natsTitle = `SciFact abstracts (${NATS_DOCS} records), in process vs --nats with one worker process (stage % of the coordinator)`;
    const natsTable = natsRows.length === 0 ? [] : [...natsRows, medianRow(natsRows)];
    printTable(natsTitle, natsTable);
    const jobsTables = [...jobsRows].map(([workers, rows]) => ({ workers, title: `SciFact abstracts (${lines.length} records), in process vs document jobs: ${workers} documents worker(s) + 1 model worker (SHOAL_THREADS=${threads}); CPU s per process`, table: [...rows, medianRow(rows)] }));
    for (const { title, table } of jobsTables) printTable(title, table);
    const jobsVerdicts = jobsTables.map(({ workers, table }) => jobsVerdict(workers, table));
    for (const line of jobsVerdicts) console.log(`\n${line}`);
    const file = writeResult(args.jobs ? 'ingest-jobs' : 'ingest', {
      command: `npx tsx bench/ingest.ts ${process.argv.slice(2).join(' ')}`,
      model: BENCH_MODEL,
      pipeline: base,
      chunkTexts: texts.length,
      ratioMedian: ratio,
      ratios,
      scifact: scifactTable,
      pdfs: pdfTable,
      nats: natsTable,
      ...(args.jobs ? { jobs: { threads, configurations: JOBS_WORKERS, verdicts: jobsVerdicts, tables: jobsTables } } : {}),
      rounds,
    });
    const scifactTitle = `SciFact abstracts (${lines.length} JSON Lines records) → LanceDB, pipeline vs encode-only of the same ${texts.length} chunks (stage % = busy time / wall)`;
    const verdict = verdictLine(ratio);
    const md = file.replace(/\.json$/, '.md');
    writeFileSync(md, [`# bench/ingest.ts`, '', `\`npx tsx bench/ingest.ts ${process.argv.slice(2).join(' ')}\``, '', markdown(scifactTitle, scifactTable), verdict, '', markdown(`PDFs of ${PDF_DIR} (OCR auto)`, pdfTable), markdown(natsTitle, natsTable), ...jobsTables.map(({ title, table }) => markdown(title, table)), ...jobsVerdicts].join('\n'));
    console.log(`\nwrote ${file}\nwrote ${md}`);
  } finally {
    await fleet?.stop();
    await nats?.stop();
    await parser.close();
    await engine.close();
  }
}

await main();
