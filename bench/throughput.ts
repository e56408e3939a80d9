import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { InferenceEngine } from '../pipelines/inference/engine.js';
import type { BatchEvent } from '../pipelines/inference/scheduler.js';
import { measureCeiling, tokenize } from './lib/ceiling.js';
import { BENCH_MODEL, mixedCorpus, queries, uniformCorpus } from './lib/corpora.js';
import { measurePeer } from './lib/peer.js';
import { percentile, printTable, writeResult, type Row } from './lib/report.js';

/**
 * Throughput and latency of Shoal's scheduler on bench-minilm-l6 (max length 256), against the
 * hardware ceiling (raw onnxruntime on pre-tokenized, length-sorted batches) and a peer
 * (transformers.js feature-extraction, batches of 32 in arrival order), all measured in this run
 * with the same thread count. Ratios are what matter; absolute figures depend on the machine.
 *
 * The ceiling is measured at every budget once to pick the best; then `--rounds` rounds alternate
 * the ceiling (at that budget) and Shoal, and the median of the per-round ratios is reported, so a
 * burst of load from elsewhere moves both sides of a ratio.
 *
 *   npx tsx bench/throughput.ts [--uniform 400] [--mixed 1600] [--threads 2] [--rounds 3] [--skip-peer] [--skip-cli]
 */

const { values: args } = parseArgs({
  options: {
    uniform: { type: 'string', default: '400' },
    mixed: { type: 'string', default: '1600' },
    threads: { type: 'string', default: '2' },
    budgets: { type: 'string', default: '512,1024,2048,4096,8192' },
    'shoal-budget': { type: 'string' },
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

interface ShoalRun {
  tokensPerSecond: number;
  seconds: number;
  paddingWaste: number;
  batches: number;
}

async function measureShoal(texts: readonly string[], realTokens: number, budget: number): Promise<ShoalRun> {
  const events: BatchEvent[] = [];
  const engine = new InferenceEngine({
    runtime: { intraOpThreads: THREADS },
    maxBatchTokens: budget,
    interactiveSessions: false,
    hooks: { scheduler: { onBatch: (event) => events.push(event) } },
  });
  try {
    await engine.encode({ model: BENCH_MODEL, items: texts.slice(0, 8), priority: 'bulk' });
    events.length = 0;
    const started = performance.now();
    await engine.encode({ model: BENCH_MODEL, items: [...texts], priority: 'bulk', max_length: MAX_LENGTH });
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

function runCli(file: string, budget: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const child = spawn(
      process.execPath,
      [join(import.meta.dirname, '..', 'bin', 'shoal.js'), 'encode', '--model', BENCH_MODEL, '--input', file, '--out', '/dev/null', '--threads', String(THREADS), '--batch-tokens', String(budget), '--max-length', String(MAX_LENGTH), '--quiet'],
      { stdio: ['ignore', 'ignore', 'inherit'] },
    );
    child.on('error', reject);
    child.on('exit', (code) => (code === 0 ? resolve((performance.now() - started) / 1000) : reject(new Error(`shoal encode exited ${code}`))));
  });
}

async function measureCli(texts: readonly string[], realTokens: number, budget: number): Promise<{ tokensPerSecond: number; seconds: number; overheadSeconds: number }> {
  const dir = mkdtempSync(join(tmpdir(), 'shoal-bench-'));
  try {
    const file = join(dir, 'input.jsonl');
    writeFileSync(file, texts.map((text, i) => JSON.stringify({ id: i, text })).join('\n'));
    const one = join(dir, 'one.jsonl');
    writeFileSync(one, JSON.stringify({ id: 0, text: texts[0] ?? '' }));
    // Start-up and model load, measured on a one-line input, are reported apart from throughput.
    const overheadSeconds = await runCli(one, budget);
    const seconds = await runCli(file, budget);
    return { tokensPerSecond: realTokens / Math.max(1e-9, seconds - overheadSeconds), seconds, overheadSeconds };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
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

const results: Record<string, unknown> = { model: BENCH_MODEL, threads: THREADS, maxLength: MAX_LENGTH };
const summary: Row[] = [];
for (const [name, texts] of [
  ['uniform', uniformCorpus(Number(args.uniform))],
  ['mixed', mixedCorpus(Number(args.mixed))],
] as const) {
  const ids = await tokenize(BENCH_MODEL, texts, MAX_LENGTH);
  const realTokens = ids.reduce((a, row) => a + row.length, 0);
  const ceilings = await measureCeiling(BENCH_MODEL, ids, budgets, THREADS);
  const best = ceilings.reduce((a, b) => (b.tokensPerSecond > a.tokensPerSecond ? b : a));
  printTable(`ceiling on ${name} (${texts.length} items, ${realTokens} tokens)`, ceilings.map((c) => ({ budget: c.budget, 'tokens/s': c.tokensPerSecond, padded: c.paddedTokens })));
  const shoalBudget = args['shoal-budget'] === undefined ? best.budget : Number(args['shoal-budget']);
  const rounds: { ceiling: number; shoal: ShoalRun }[] = [];
  for (let round = 0; round < Number(args.rounds); round++) {
    const [ceiling] = await measureCeiling(BENCH_MODEL, ids, [best.budget], THREADS);
    rounds.push({ ceiling: ceiling?.tokensPerSecond ?? Number.NaN, shoal: await measureShoal(texts, realTokens, shoalBudget) });
  }
  const ceilingRate = median(rounds.map((r) => r.ceiling));
  const shoal = rounds.map((r) => r.shoal).sort((a, b) => a.tokensPerSecond - b.tokensPerSecond)[Math.floor(rounds.length / 2)] ?? rounds[0]?.shoal;
  if (shoal === undefined) throw new Error('no rounds');
  const shoalRatio = median(rounds.map((r) => r.shoal.tokensPerSecond / r.ceiling));
  const peer = args['skip-peer'] ? null : await measurePeer(BENCH_MODEL, texts, realTokens, THREADS);
  const cli = args['skip-cli'] ? null : await measureCli(texts, realTokens, shoalBudget);
  results[name] = { items: texts.length, realTokens, ceilings, best, shoalBudget, rounds, shoal, shoalRatio, peer: peer === null ? null : { tokensPerSecond: peer.tokensPerSecond, seconds: peer.seconds }, cli };
  summary.push({
    corpus: name,
    'ceiling tok/s': ceilingRate,
    'shoal tok/s': shoal.tokensPerSecond,
    'shoal items/s': (texts.length * shoal.tokensPerSecond) / realTokens,
    'shoal/ceiling': shoalRatio,
    'peer tok/s': peer?.tokensPerSecond ?? Number.NaN,
    'shoal/peer': peer === null ? Number.NaN : shoal.tokensPerSecond / peer.tokensPerSecond,
    'cli tok/s': cli?.tokensPerSecond ?? Number.NaN,
    'cli/ceiling': cli === null ? Number.NaN : cli.tokensPerSecond / ceilingRate,
    'padding %': shoal.paddingWaste * 100,
  });
}
printTable('throughput (ratios measured in this run)', summary);
if (!args['skip-latency']) {
  const latency = await measureLatency(Number(args['shoal-budget'] ?? 2048), Number(args['latency-queries']));
  results.latency = latency;
  printTable('interactive 16-token query latency (ms), idle vs bulk-saturated', [latency]);
}
console.log(`\nresults: ${writeResult('throughput', results)}`);
