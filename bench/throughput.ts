import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { InferenceEngine } from '../pipelines/inference/engine.js';
import { parseCatalog } from '../pipelines/inference/catalog.js';
import type { BatchEvent } from '../pipelines/inference/scheduler.js';
import { measureCeiling, tokenize } from './lib/ceiling.js';
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
 * to exit, start-up and model load included; a one-line run of each is measured once and reported
 * apart). The ratios reported are medians of the per-round ratios, so a burst of load from
 * elsewhere moves both sides of a ratio.
 *
 *   npx tsx bench/throughput.ts [--uniform 400] [--mixed 1600] [--threads 2] [--rounds 3]
 *     [--precisions fp32,int8] [--skip-peer] [--skip-cli] [--skip-latency]
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
  },
});

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
    runtime: { intraOpThreads: THREADS, cacheDir },
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

/** Wall seconds of one whole `shoal encode` process, from spawn to exit. */
function runCli(precision: Precision, file: string, budget: number | null): Promise<number> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const flags = ['encode', '--model', `bench.${precision}`, '--catalog', catalogFile, '--input', file, '--out', '/dev/null', '--threads', String(THREADS), '--max-length', String(MAX_LENGTH), '--quiet'];
    if (budget !== null) flags.push('--batch-tokens', String(budget));
    // SHOAL_FROM_SOURCE: the sources as they are now, not a dist/ built earlier.
    const child = spawn(process.execPath, [join(import.meta.dirname, '..', 'bin', 'shoal.js'), ...flags], {
      stdio: ['ignore', 'ignore', 'inherit'],
      env: { ...process.env, SHOAL_CACHE_DIR: cacheDir, SHOAL_FROM_SOURCE: process.env.SHOAL_FROM_SOURCE ?? '1' },
    });
    child.on('error', reject);
    child.on('exit', (code) => (code === 0 ? resolve((performance.now() - started) / 1000) : reject(new Error(`shoal encode exited ${code}`))));
  });
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

interface Round {
  ceiling: number;
  shoal: ShoalRun;
  /** Whole-process tokens/s of `shoal encode`, null with --skip-cli. */
  cli: number | null;
}

const results: Record<string, unknown> = { model: BENCH_MODEL, threads: THREADS, maxLength: MAX_LENGTH };
const summary: Row[] = [];
try {
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
    const best = new Map<Precision, number>();
    for (const precision of PRECISIONS) {
      const ceilings = await measureCeiling(BENCH_MODEL, ids, budgets, THREADS, graphs.get(precision));
      const top = ceilings.reduce((a, b) => (b.tokensPerSecond > a.tokensPerSecond ? b : a));
      best.set(precision, top.budget);
      printTable(`${precision} ceiling on ${name} (${texts.length} items, ${realTokens} tokens)`, ceilings.map((c) => ({ budget: c.budget, 'tokens/s': c.tokensPerSecond, padded: c.paddedTokens })));
    }
    // Start-up and model load of the CLI, on a one-line input (reported apart; the ratios use whole runs).
    const startup = new Map<Precision, number>();
    if (!args['skip-cli']) for (const precision of PRECISIONS) startup.set(precision, await runCli(precision, one, null));
    const rounds = new Map<Precision, Round[]>(PRECISIONS.map((p) => [p, []]));
    for (let round = 0; round < Number(args.rounds); round++) {
      for (const precision of PRECISIONS) {
        const budget = args['shoal-budget'] === undefined ? (best.get(precision) ?? 2048) : Number(args['shoal-budget']);
        const [ceiling] = await measureCeiling(BENCH_MODEL, ids, [best.get(precision) ?? 2048], THREADS, graphs.get(precision));
        const shoal = await measureShoal(precision, texts, realTokens, budget);
        // The CLI runs with its own default budget (what a user gets), not the bench's best.
        const cli = args['skip-cli'] ? null : realTokens / (await runCli(precision, input, null));
        rounds.get(precision)?.push({ ceiling: ceiling?.tokensPerSecond ?? Number.NaN, shoal, cli });
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
      const vsFp32 = fp32Rounds.length === list.length ? median(list.map((r, i) => (r.cli ?? Number.NaN) / (fp32Rounds[i]?.cli ?? Number.NaN))) : Number.NaN;
      perPrecision[precision] = { bestBudget: best.get(precision), rounds: list, startupSeconds: startup.get(precision) ?? null };
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
        'cli start s': startup.get(precision) ?? Number.NaN,
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
