import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { InferenceEngine } from '../pipelines/inference/engine.js';
import { parseCatalog } from '../pipelines/inference/catalog.js';
import type { BatchEvent } from '../pipelines/inference/scheduler-options.js';
import { measureCeiling, tokenize } from './lib/ceiling.js';
import { checkedLineCount, ensureBuiltCli, runShoal, steadyTokensPerSecond, type CliTiming } from './lib/cli-run.js';
import { BENCH_MODEL, mixedCorpus, queries, uniformCorpus } from './lib/corpora.js';
import { measurePeer } from './lib/peer.js';
import { percentile, printTable, writeResult, type Row } from './lib/report.js';

/**
 * Throughput and latency of Shoal's scheduler on bench-minilm-l6 (max length 256), in fp32 and
 * int8, against the hardware ceiling of each (raw onnxruntime on pre-tokenized, length-sorted
 * batches at the best token budget; for int8 on the very quantized graph Shoal loads, taken from
 * its load info) and a peer (transformers.js feature-extraction, batches of 32 in arrival order,
 * truncating at the same 256 tokens), all measured in this run with the same thread count.
 *
 * Each round runs, one after another: ceiling fp32, Shoal fp32 in process, ceiling int8, Shoal
 * int8 in process, then the whole `shoal encode` process for fp32 and int8 (wall time from spawn
 * to exit, start-up and model load included). The CLI is the built one (bin/shoal.js on dist/, as
 * installed): a dist/ older than its sources is refused, `--build` runs `npm run build` first.
 * Its start-up is reported apart: `shoal --version` (node and the CLI's modules), a one-line
 * encode (plus model load and a first batch), and in each whole run the moment of the first
 * output line; "cli after start" is the corpus's tokens over the whole run less the one-line run.
 * The ratios reported are medians of the per-round ratios, so a burst of load from elsewhere
 * moves both sides of a ratio.
 *
 * `--steady K` (issue 40: steady-state throughput through the CLI, measured from outside the
 * process): each round also runs `shoal encode` on the corpus repeated K times, and the CLI's
 * steady rate is (tokens(K·N) − tokens(N)) / (T(K·N) − T(N)), T the whole run's wall time, so
 * start-up, model load and exit cancel out; its ceiling is raw onnxruntime on the K·N corpus at
 * its best budget (for int8 on the graph Shoal caches). A run whose output line count differs from
 * its input's is refused.
 *
 *   npx tsx bench/throughput.ts [--uniform 400] [--mixed 1600] [--threads 2] [--rounds 3]
 *     [--precisions fp32,int8] [--skip-peer] [--skip-cli] [--skip-latency] [--build]
 *     [--cli-from-source] [--cli-batch-tokens N] [--cli-prof DIR] [--steady K]
 */

const { values: args } = parseArgs({
  options: {
    uniform: { type: 'string', default: '400' },
    mixed: { type: 'string', default: '1600' },
    threads: { type: 'string', default: '2' },
    budgets: { type: 'string', default: '512,1024,2048,4096' },
    'shoal-budget': { type: 'string' },
    precisions: { type: 'string', default: 'fp32,int8' },
    'latency-queries': { type: 'string', default: '200' },
    rounds: { type: 'string', default: '3' },
    'skip-peer': { type: 'boolean', default: false },
    'skip-cli': { type: 'boolean', default: false },
    'skip-latency': { type: 'boolean', default: false },
    /** `npm run build` before timing the CLI (otherwise a stale dist/ is refused). */
    build: { type: 'boolean', default: false },
    /** Time the CLI from the TypeScript sources through tsx, as before (start-up includes compiling). */
    'cli-from-source': { type: 'boolean', default: false },
    /** --batch-tokens for the CLI (default: none, the CLI's own default, what a user gets). */
    'cli-batch-tokens': { type: 'string' },
    /** node --cpu-prof of every whole CLI run (main and model threads), written to this folder. */
    'cli-prof': { type: 'string' },
    /** Steady-state CLI throughput from runs of N and K·N texts (0: off). */
    steady: { type: 'string', default: '0' },
  },
});
const STEADY = Number(args.steady);

const THREADS = Number(args.threads);
const MAX_LENGTH = 256;
const budgets = (args.budgets ?? '').split(',').map(Number);
const PRECISIONS = (args.precisions ?? '').split(',').filter((p): p is 'fp32' | 'int8' => p === 'fp32' || p === 'int8');
type Precision = (typeof PRECISIONS)[number];

const workDir = mkdtempSync(join(tmpdir(), 'shoal-bench-'));
/** One catalog for the engine and the CLI: the bench model under a name per precision. */
const CATALOG = { models: { 'bench.fp32': { source: BENCH_MODEL, precision: 'fp32' }, 'bench.int8': { source: BENCH_MODEL, precision: 'int8' } } };
const catalogFile = join(workDir, 'catalog.json');
writeFileSync(catalogFile, JSON.stringify(CATALOG));
/** The int8 graph is built once into this run's own cache, shared by the engine and the CLI. */
const cacheDir = join(workDir, 'cache');

function engineFor(budget: number, extra: { onBatch?: (event: BatchEvent) => void } = {}): InferenceEngine {
  return new InferenceEngine({
    catalog: parseCatalog(CATALOG, 'throughput bench'),
    // One model in one process, like `shoal encode`: onnxruntime's CPU arena on, as the CLI runs it
    // (services/cli/app.ts); without it large batches map fresh memory (README, CPU arena).
    runtime: { intraOpThreads: THREADS, cacheDir, cpuMemArena: true },
    maxBatchTokens: budget,
    interactiveSessions: false,
    ...(extra.onBatch === undefined ? {} : { hooks: { scheduler: { onBatch: extra.onBatch } } }),
  });
}

/** The graph file Shoal runs for a precision (the int8 one is built and fidelity-checked here). */
async function graphOf(precision: Precision): Promise<string> {
  const engine = engineFor(2048);
  try {
    const info = (await engine.inspect(`bench.${precision}`)).info.precision?.model;
    if (info?.effective !== precision) throw new Error(`bench.${precision} runs ${info?.effective ?? 'unknown'}: ${info?.reason ?? ''}`);
    return info.graph;
  } finally {
    await engine.close();
  }
}

interface ShoalRun {
  tokensPerSecond: number;
  seconds: number;
  paddingWaste: number;
  batches: number;
}

async function measureShoal(precision: Precision, texts: readonly string[], realTokens: number, budget: number): Promise<ShoalRun> {
  const events: BatchEvent[] = [];
  const engine = engineFor(budget, { onBatch: (event) => events.push(event) });
  const model = `bench.${precision}`;
  try {
    await engine.encode({ model, items: texts.slice(0, 8), priority: 'bulk' });
    events.length = 0;
    const started = performance.now();
    await engine.encode({ model, items: [...texts], priority: 'bulk', max_length: MAX_LENGTH });
    const seconds = (performance.now() - started) / 1000;
    const padded = events.reduce((a, e) => a + e.paddedTokens, 0);
    const real = events.reduce((a, e) => a + e.realTokens, 0);
    return { tokensPerSecond: realTokens / seconds, seconds, paddingWaste: padded === 0 ? 0 : (padded - real) / padded, batches: events.length };
  } finally {
    await engine.close();
  }
}

function median(values: readonly number[]): number {
  return percentile(values, 50);
}

const CLI_BUDGET = args['cli-batch-tokens'] === undefined ? null : Number(args['cli-batch-tokens']);
const cliEnv: NodeJS.ProcessEnv = { SHOAL_CACHE_DIR: cacheDir };
if (args['cli-prof'] !== undefined) cliEnv.NODE_OPTIONS = `${process.env.NODE_OPTIONS ?? ''} --cpu-prof --cpu-prof-dir=${args['cli-prof']}`.trim();

/** One whole `shoal encode` process, from spawn to exit; the JSON lines go to stdout, read through a pipe. */
function runCli(precision: Precision, file: string): Promise<CliTiming> {
  const flags = ['encode', '--model', `bench.${precision}`, '--catalog', catalogFile, '--input', file, '--threads', String(THREADS), '--max-length', String(MAX_LENGTH), '--quiet'];
  if (CLI_BUDGET !== null) flags.push('--batch-tokens', String(CLI_BUDGET));
  return runShoal(flags, { fromSource: args['cli-from-source'], env: cliEnv });
}

/** A whole run that wrote one line per input text; any other count is refused (an output lost or doubled makes any rate meaningless). */
async function runCliChecked(precision: Precision, file: string, lines: number): Promise<CliTiming> {
  return checkedLineCount(await runCli(precision, file), lines, `shoal encode ${precision}`);
}

function writeInput(name: string, texts: readonly string[]): string {
  const file = join(workDir, `${name}.jsonl`);
  writeFileSync(file, texts.map((text, i) => JSON.stringify({ id: i, text })).join('\n'));
  return file;
}

async function measureLatency(budget: number, count: number): Promise<Record<string, number>> {
  const engine = new InferenceEngine({ runtime: { intraOpThreads: THREADS }, maxBatchTokens: budget });
  const tokenized = await tokenize(BENCH_MODEL, queries(), MAX_LENGTH);
  const short = queries().filter((_, i) => (tokenized[i]?.length ?? 0) >= 14 && (tokenized[i]?.length ?? 0) <= 18);
  const probe = async (): Promise<number[]> => {
    const times: number[] = [];
    for (let i = 0; i < count; i++) {
      const started = performance.now();
      await engine.encode({ model: BENCH_MODEL, items: [short[i % short.length] ?? 'query'], priority: 'interactive' });
      times.push(performance.now() - started);
    }
    return times;
  };
  try {
    await engine.encode({ model: BENCH_MODEL, items: short.slice(0, 4), priority: 'interactive' });
    // Let the interactive session come up before measuring.
    await new Promise((resolve) => setTimeout(resolve, 1500));
    await engine.encode({ model: BENCH_MODEL, items: short.slice(0, 4), priority: 'interactive' });
    const idle = await probe();
    const controller = new AbortController();
    const bulk = engine
      .encode({ model: BENCH_MODEL, items: uniformCorpus(3000), priority: 'bulk' }, { signal: controller.signal })
      .catch(() => undefined);
    await new Promise((resolve) => setTimeout(resolve, 2000));
    const loaded = await probe();
    const bulkStillRunning = engine.scheduler.queuedItems > 0;
    controller.abort();
    await bulk;
    return {
      idleP50: percentile(idle, 50),
      idleP99: percentile(idle, 99),
      loadedP50: percentile(loaded, 50),
      loadedP99: percentile(loaded, 99),
      ratioP99LoadedToIdleP50: percentile(loaded, 99) / percentile(idle, 50),
      bulkSaturatedThroughout: bulkStillRunning ? 1 : 0,
    };
  } finally {
    await engine.close();
  }
}

interface SteadyRound {
  /** Wall seconds of the K·N run. */
  seconds: number;
  /** (tokens(K·N) − tokens(N)) / (T(K·N) − T(N)). */
  tokensPerSecond: number;
  /** Raw onnxruntime on the K·N corpus at its best budget. */
  ceiling: number;
}

interface Round {
  ceiling: number;
  steady: SteadyRound | null;
  shoal: ShoalRun;
  /** Whole-process tokens/s of `shoal encode`, null with --skip-cli. */
  cli: number | null;
  cliTiming: CliTiming | null;
}

const results: Record<string, unknown> = {
  model: BENCH_MODEL,
  threads: THREADS,
  maxLength: MAX_LENGTH,
  cli: args['skip-cli'] ? null : { from: args['cli-from-source'] ? 'sources (tsx)' : 'dist (built)', batchTokens: CLI_BUDGET ?? 'CLI default' },
};
const summary: Row[] = [];
try {
  let versionSeconds = Number.NaN;
  if (!args['skip-cli']) {
    if (!args['cli-from-source']) {
      try {
        ensureBuiltCli(args.build);
      } catch (error) {
        console.error(`throughput: ${error instanceof Error ? error.message : String(error)}`);
        rmSync(workDir, { recursive: true, force: true });
        process.exit(2);
      }
    }
    // Node and the CLI's own modules, nothing else: the floor of every `shoal` command.
    const versions: number[] = [];
    for (let i = 0; i < 3; i++) versions.push((await runShoal(['--version'], { fromSource: args['cli-from-source'] })).seconds);
    versionSeconds = median(versions);
    results.cliVersionSeconds = versions;
    console.log(`shoal --version: ${versions.map((v) => v.toFixed(2)).join(', ')} s (${results.cli === null ? '' : (results.cli as { from: string }).from})`);
  }
  const graphs = new Map<Precision, string>();
  for (const precision of PRECISIONS) graphs.set(precision, await graphOf(precision));
  results.graphs = Object.fromEntries(graphs);
  for (const [name, texts] of [
    // Mixed first: the corpus the targets are set on.
    ['mixed', mixedCorpus(Number(args.mixed))],
    ['uniform', uniformCorpus(Number(args.uniform))],
  ] as const) {
    if (texts.length === 0) continue;
    const ids = await tokenize(BENCH_MODEL, texts, MAX_LENGTH);
    const realTokens = ids.reduce((a, row) => a + row.length, 0);
    const input = writeInput(name, texts);
    const one = writeInput(`${name}-one`, texts.slice(0, 1));
    // The K·N corpus of the steady-state runs (the mixed corpus only: the one the targets are set on).
    const steadyTexts = STEADY > 1 && name === 'mixed' && !args['skip-cli'] ? Array.from({ length: STEADY }, () => texts).flat() : [];
    const steadyInput = steadyTexts.length === 0 ? null : writeInput(`${name}-x${STEADY}`, steadyTexts);
    const steadyIds = steadyTexts.length === 0 ? [] : Array.from({ length: STEADY }, () => ids).flat();
    const steadyTokens = realTokens * STEADY;
    const best = new Map<Precision, number>();
    for (const precision of PRECISIONS) {
      const ceilings = await measureCeiling(BENCH_MODEL, ids, budgets, THREADS, graphs.get(precision));
      const top = ceilings.reduce((a, b) => (b.tokensPerSecond > a.tokensPerSecond ? b : a));
      best.set(precision, top.budget);
      printTable(`${precision} ceiling on ${name} (${texts.length} items, ${realTokens} tokens)`, ceilings.map((c) => ({ budget: c.budget, 'tokens/s': c.tokensPerSecond, padded: c.paddedTokens })));
    }
    // Start-up and model load of the CLI, on a one-line input (reported apart; the ratios use whole runs).
    const startup = new Map<Precision, number>();
    if (!args['skip-cli']) for (const precision of PRECISIONS) startup.set(precision, (await runCli(precision, one)).seconds);
    const rounds = new Map<Precision, Round[]>(PRECISIONS.map((p) => [p, []]));
    for (let round = 0; round < Number(args.rounds); round++) {
      for (const precision of PRECISIONS) {
        const budget = args['shoal-budget'] === undefined ? (best.get(precision) ?? 2048) : Number(args['shoal-budget']);
        const [ceiling] = await measureCeiling(BENCH_MODEL, ids, [best.get(precision) ?? 2048], THREADS, graphs.get(precision));
        const shoal = await measureShoal(precision, texts, realTokens, budget);
        // The CLI runs with its own default budget (what a user gets), not the bench's best.
        const cliTiming = args['skip-cli'] ? null : await runCliChecked(precision, input, texts.length);
        const cli = cliTiming === null ? null : realTokens / cliTiming.seconds;
        let steady: SteadyRound | null = null;
        if (steadyInput !== null && cliTiming !== null) {
          const [steadyCeiling] = await measureCeiling(BENCH_MODEL, steadyIds, [best.get(precision) ?? 2048], THREADS, graphs.get(precision));
          const long = await runCliChecked(precision, steadyInput, steadyTexts.length);
          steady = { seconds: long.seconds, tokensPerSecond: steadyTokensPerSecond({ tokens: realTokens, seconds: cliTiming.seconds }, { tokens: steadyTokens, seconds: long.seconds }), ceiling: steadyCeiling?.tokensPerSecond ?? Number.NaN };
        }
        rounds.get(precision)?.push({ ceiling: ceiling?.tokensPerSecond ?? Number.NaN, steady, shoal, cli, cliTiming });
      }
    }
    const peer = args['skip-peer'] ? null : await measurePeer(BENCH_MODEL, texts, realTokens, THREADS, MAX_LENGTH);
    const perPrecision: Record<string, unknown> = {};
    const fp32Rounds = rounds.get('fp32') ?? [];
    for (const precision of PRECISIONS) {
      const list = rounds.get(precision) ?? [];
      const ceilingRate = median(list.map((r) => r.ceiling));
      const shoalRate = median(list.map((r) => r.shoal.tokensPerSecond));
      const cliRates = list.map((r) => r.cli ?? Number.NaN);
      const cliRate = median(cliRates);
      // The whole run less the one-line run (start-up, model load, a first batch): the CLI's throughput proper.
      const oneLine = startup.get(precision) ?? Number.NaN;
      const afterStart = list.map((r) => (r.cliTiming === null ? Number.NaN : realTokens / (r.cliTiming.seconds - oneLine)));
      const vsFp32 = fp32Rounds.length === list.length ? median(list.map((r, i) => (r.cli ?? Number.NaN) / (fp32Rounds[i]?.cli ?? Number.NaN))) : Number.NaN;
      perPrecision[precision] = { bestBudget: best.get(precision), rounds: list, oneLineSeconds: startup.get(precision) ?? null };
      summary.push({
        corpus: name,
        precision,
        'ceiling tok/s': ceilingRate,
        'shoal tok/s': shoalRate,
        'shoal/ceiling': median(list.map((r) => r.shoal.tokensPerSecond / r.ceiling)),
        'cli tok/s': cliRate,
        'cli/ceiling': median(list.map((r) => (r.cli ?? Number.NaN) / r.ceiling)),
        'cli/fp32 cli': vsFp32,
        'cli/peer': peer === null ? Number.NaN : cliRate / peer.tokensPerSecond,
        'shoal/peer': peer === null ? Number.NaN : shoalRate / peer.tokensPerSecond,
        'cli after start/ceiling': median(list.map((r, i) => (afterStart[i] ?? Number.NaN) / r.ceiling)),
        ...(steadyInput === null ? {} : {
          [`steady x${STEADY} tok/s`]: median(list.map((r) => r.steady?.tokensPerSecond ?? Number.NaN)),
          [`steady/ceiling x${STEADY}`]: median(list.map((r) => (r.steady?.tokensPerSecond ?? Number.NaN) / (r.steady?.ceiling ?? Number.NaN))),
        }),
        'version s': versionSeconds,
        '1-line s': oneLine,
        'first out s': median(list.map((r) => r.cliTiming?.firstOutputSeconds ?? Number.NaN)),
        'cli run s': median(list.map((r) => r.cliTiming?.seconds ?? Number.NaN)),
        'padding %': median(list.map((r) => r.shoal.paddingWaste)) * 100,
      });
    }
    results[name] = { items: texts.length, realTokens, ...perPrecision, peer: peer === null ? null : { tokensPerSecond: peer.tokensPerSecond, seconds: peer.seconds } };
    printTable(`so far (medians of ${args.rounds} rounds)`, summary);
  }
  printTable('throughput (ratios: medians of per-round ratios, measured in this run)', summary);
  if (!args['skip-latency']) {
    const latency = await measureLatency(Number(args['shoal-budget'] ?? 2048), Number(args['latency-queries']));
    results.latency = latency;
    printTable('interactive 16-token query latency (ms), idle vs bulk-saturated', [latency]);
  }
  console.log(`\nresults: ${writeResult('throughput', results)}`);
} finally {
  rmSync(workDir, { recursive: true, force: true });
}
