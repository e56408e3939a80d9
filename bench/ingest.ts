import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { Readable } from 'node:stream';
import { parseArgs } from 'node:util';
import { spawn } from 'node:child_process';
import { connectNats } from '../adapters/nats/connection.js';
import { LanceDbSink } from '../adapters/sinks/lancedb.js';
import { NatsIngest } from '../pipelines/documents/nats-ingest.js';
import { startNatsServer } from '../test/helpers/nats-server.js';
import { resolvePipeline } from '../pipelines/documents/builtin.js';
import { chunkPages, encoderTokenLimit, engineTokenCounter, type ChunkSettings } from '../pipelines/documents/chunk.js';
import { applyOverrides, type PipelineDefinition } from '../pipelines/documents/definition.js';
import { DocumentParser } from '../pipelines/documents/parse.js';
import { IngestRunner, type IngestStage, type IngestSummary } from '../pipelines/documents/runner.js';
import { fileSources, recordSources, type PendingSource } from '../pipelines/documents/sources.js';
import { InferenceEngine } from '../pipelines/inference/engine.js';
import { engineOptionsFromEnv } from '../services/settings/engine-settings.js';
import { BENCH_MODEL, DATA_DIR } from './lib/corpora.js';
import { percentile, printTable, writeResult, type Row } from './lib/report.js';

/**
 * `shoal ingest` speed, in process, through the same runner the CLI uses (IngestRunner with the
 * built-in `documents` pipeline, DocumentParser, LanceDbSink), with bench-minilm-l6 (real
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
 *   npx tsx bench/ingest.ts [--rounds 3] [--docs 1000] [--skip-pdfs] [--skip-baseline] [--nats] [--nats-docs N]
 */

const { values: args } = parseArgs({
  options: {
    rounds: { type: 'string', default: '3' },
    docs: { type: 'string', default: '1000' },
    'skip-pdfs': { type: 'boolean', default: false },
    'skip-baseline': { type: 'boolean', default: false },
    nats: { type: 'boolean', default: false },
    'nats-docs': { type: 'string' },
  },
});

const ROUNDS = Number(args.rounds);
const DOCS = Number(args.docs);
const PDF_DIR = join(DATA_DIR, 'pdfs');
/** Same request size as pipelines/documents/stages/encode.ts. */
const ENCODE_REQUEST_ITEMS = 8_192;
const STAGES: readonly IngestStage[] = ['parse', 'chunk', 'encode', 'write', 'wait'];
const NATS_DOCS = args['nats-docs'] === undefined ? DOCS : Number(args['nats-docs']);
const NATS_PREFIX = 'benchingest';

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
}

async function runPipeline(engine: InferenceEngine, parser: DocumentParser, base: PipelineDefinition, sources: readonly PendingSource[]): Promise<PipelineRun> {
  const dir = mkdtempSync(join(tmpdir(), 'shoal-bench-ingest-'));
  const definition = applyOverrides(base, { index: dir });
  const sink = new LanceDbSink({ dir, table: definition.stages.write.table });
  const stages = Object.fromEntries(STAGES.map((stage) => [stage, 0])) as Record<IngestStage, number>;
  try {
    const runner = new IngestRunner({ definition, engine, sink, reader: parser, onStage: (stage, ms) => (stages[stage] += ms / 1000) });
    const started = performance.now();
    const summary = await runner.run(sources);
    const seconds = (performance.now() - started) / 1000;
    return { summary, seconds, stages, rows: await sink.count() };
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
  const sink = new LanceDbSink({ dir, table: definition.stages.write.table });
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
  const engine = new InferenceEngine(engineOptionsFromEnv(process.env));
  const base = applyOverrides(await resolvePipeline(undefined), { model: BENCH_MODEL });
  const parser = new DocumentParser(engine, { ...base.stages.parse });
  const lines = scifactLines(DOCS);
  const pdfFiles = readdirSync(PDF_DIR).filter((name) => name.endsWith('.pdf'));
  const nats = args.nats ? await startNats() : null;
  try {
    if (nats !== null) await runNatsPipeline(nats.ingest, base, await recordsOf(lines.slice(0, 8)));
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
    for (let round = 1; round <= ROUNDS; round++) {
      const sources = await recordsOf(lines);
      let pipeline: PipelineRun | undefined;
      let baseline = Number.NaN;
      // Alternate the order so drift within a round does not favour one side.
      for (const side of round % 2 === 1 ? (['pipeline', 'baseline'] as const) : (['baseline', 'pipeline'] as const)) {
        if (side === 'pipeline') pipeline = await runPipeline(engine, parser, base, sources);
        else if (!args['skip-baseline']) baseline = await encodeOnly(engine, base, texts);
      }
      if (pipeline === undefined) throw new Error('no pipeline run');
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
      for (const key of Object.keys(rows[0] ?? {})) if (key !== 'round') out[key] = median(rows.map((r) => Number(r[key])));
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
    const file = writeResult('ingest', {
      command: `npx tsx bench/ingest.ts ${process.argv.slice(2).join(' ')}`,
      model: BENCH_MODEL,
      pipeline: base,
      chunkTexts: texts.length,
      ratioMedian: ratio,
      ratios,
      scifact: scifactTable,
      pdfs: pdfTable,
      nats: natsTable,
      rounds,
    });
    const scifactTitle = `SciFact abstracts (${lines.length} JSON Lines records) → LanceDB, pipeline vs encode-only of the same ${texts.length} chunks (stage % = busy time / wall)`;
    const verdict = verdictLine(ratio);
    const md = file.replace(/\.json$/, '.md');
    writeFileSync(md, [`# bench/ingest.ts`, '', `\`npx tsx bench/ingest.ts ${process.argv.slice(2).join(' ')}\``, '', markdown(scifactTitle, scifactTable), verdict, '', markdown(`PDFs of ${PDF_DIR} (OCR auto)`, pdfTable), markdown(natsTitle, natsTable)].join('\n'));
    console.log(`\nwrote ${file}\nwrote ${md}`);
  } finally {
    await nats?.stop();
    await parser.close();
    await engine.close();
  }
}

await main();
