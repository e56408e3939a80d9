import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { canReturnFreedMemory } from '../adapters/runtime/native-memory.js';
import type { InferenceEngine } from '../pipelines/inference/engine.js';
import { generator } from '../test/fixtures/build/random.js';
import { abstracts, queries, SHARED_DIR } from './lib/corpora.js';
import { percentile, printTable, writeResult } from './lib/report.js';

/**
 * Model-pool soak: 8 models of the conformance kit, random requests at a fixed concurrency.
 * Phase 1 runs with every model resident (budget large enough for all); phase 2 with a budget that
 * fits the 3 largest models only, so models are evicted and reloaded all the time. Reported: errors,
 * the largest resident bytes seen against the budget, RSS at the end, phase-2 throughput as a ratio
 * of phase 1 (same request mix, same process), and cold-load times of bench-minilm-l6.
 *
 *   npx tsx bench/soak.ts [--minutes 10] [--baseline-minutes 2] [--concurrency 4] [--no-thread-reuse] [--mem-arena] [--from-source]
 * (freed memory goes back to the OS through malloc_trim after each unload, as in `shoal`; without the
 * addon in native/ it re-executes itself with MALLOC_TRIM_THRESHOLD_=0, as bin/shoal.js does)
 *
 * The engine runs from the compiled `dist/` (built first with `npm run build`), as `shoal` runs
 * once built: every load in a tight pool may start a model thread, and a thread that imports the
 * TypeScript sources through tsx starts 3-4 times slower than one on compiled JavaScript.
 * `--from-source` measures the sources instead.
 */

if (!canReturnFreedMemory() && process.env.MALLOC_TRIM_THRESHOLD_ === undefined) {
  const child = spawnSync(process.execPath, [...process.execArgv, ...process.argv.slice(1)], {
    stdio: 'inherit',
    env: { ...process.env, MALLOC_TRIM_THRESHOLD_: '0' },
  });
  process.exit(child.status ?? 1);
}

const { values: args } = parseArgs({
  options: {
    minutes: { type: 'string', default: '10' },
    'baseline-minutes': { type: 'string', default: '2' },
    concurrency: { type: 'string', default: '4' },
    threads: { type: 'string', default: '2' },
    seed: { type: 'string', default: '7' },
    'no-thread-reuse': { type: 'boolean', default: false },
    'from-source': { type: 'boolean', default: false },
    'mem-arena': { type: 'boolean', default: false },
  },
});

type EngineModule = typeof import('../pipelines/inference/engine.js');
async function engineModule(): Promise<EngineModule> {
  if (args['from-source']) return import('../pipelines/inference/engine.js');
  const root = new URL('../', import.meta.url);
  const build = spawnSync('npm', ['run', '--silent', 'build'], { cwd: root, stdio: 'inherit' });
  if (build.status !== 0) throw new Error('npm run build failed; run with --from-source to use the sources');
  const compiled: EngineModule = await import(new URL('dist/pipelines/inference/engine.js', root).href);
  return compiled;
}
const { InferenceEngine: Engine } = await engineModule();

const KIT = join(SHARED_DIR, 'conformance');
type Kind = 'encode' | 'score' | 'extract';
const MODELS: { name: string; kind: Kind; labels?: string[] }[] = [
  { name: 'bench-minilm-l6', kind: 'encode' },
  { name: 'bert-mean-embed', kind: 'encode' },
  { name: 'xlmr-mean-embed', kind: 'encode' },
  { name: 'qwen2-last-embed', kind: 'encode' },
  { name: 'bert-splade', kind: 'encode' },
  { name: 'bert-cross-encoder', kind: 'score' },
  { name: 'bert-token-classification', kind: 'extract' },
  { name: 'gliner-span', kind: 'extract', labels: ['person', 'organization', 'location'] },
];

const docs = abstracts().slice(0, 2000);
const qs = queries();

async function request(engine: InferenceEngine, next: () => number): Promise<void> {
  const model = MODELS[Math.floor(next() * MODELS.length)] ?? MODELS[0];
  if (model === undefined) return;
  const dir = join(KIT, model.name);
  const size = 1 + Math.floor(next() * 8);
  const start = Math.floor(next() * (docs.length - size));
  const items = docs.slice(start, start + size);
  if (model.kind === 'encode') await engine.encode({ model: dir, items, priority: 'bulk' });
  else if (model.kind === 'score') await engine.score({ model: dir, query: qs[start % qs.length] ?? 'query', items, priority: 'bulk' });
  else await engine.extract({ model: dir, items, priority: 'bulk', ...(model.labels === undefined ? {} : { labels: model.labels }) });
}

interface Phase {
  requests: number;
  errors: string[];
  seconds: number;
  requestsPerSecond: number;
  maxResidentBytes: number;
  budgetBytes: number;
  evictions: number;
  loads: number;
  coldLoadSeconds: number[];
  rssEndBytes: number;
}

async function phase(budgetBytes: number, minutes: number, predictedOnly = false): Promise<Phase | number> {
  let maxResident = 0;
  let evictions = 0;
  let loads = 0;
  const coldLoads: number[] = [];
  const engine = new Engine({
    runtime: { intraOpThreads: Number(args.threads), ...(args['mem-arena'] ? { cpuMemArena: true } : {}) },
    memoryBudget: budgetBytes,
    interactiveSessions: false,
    reuseModelThreads: !args['no-thread-reuse'],
    hooks: {
      pool: {
        onChange: (snapshot) => {
          maxResident = Math.max(maxResident, snapshot.residentBytes);
        },
        onEvict: () => {
          evictions++;
        },
        onLoad: (event) => {
          loads++;
          if (event.name.endsWith('bench-minilm-l6')) coldLoads.push(event.seconds);
        },
      },
    },
  });
  try {
    if (predictedOnly) {
      const sizes: number[] = [];
      for (const model of MODELS) {
        const inspected = await engine.inspect(join(KIT, model.name));
        sizes.push(inspected.predictedBytes);
        await engine.unload(join(KIT, model.name));
      }
      sizes.sort((a, b) => b - a);
      // The budget that fits the three largest models (so any three fit).
      return (sizes[0] ?? 0) + (sizes[1] ?? 0) + (sizes[2] ?? 0);
    }
    // Deterministic pseudo-random numbers (mulberry32): both phases see the same request mix.
    const next = generator(Number(args.seed));
    const deadline = performance.now() + minutes * 60_000;
    const errors: string[] = [];
    let requests = 0;
    const started = performance.now();
    const lane = async (): Promise<void> => {
      while (performance.now() < deadline) {
        try {
          await request(engine, next);
          requests++;
        } catch (error) {
          errors.push(String(error));
        }
      }
    };
    await Promise.all(Array.from({ length: Number(args.concurrency) }, lane));
    const seconds = (performance.now() - started) / 1000;
    return {
      requests,
      errors: errors.slice(0, 20),
      seconds,
      requestsPerSecond: requests / seconds,
      maxResidentBytes: maxResident,
      budgetBytes,
      evictions,
      loads,
      coldLoadSeconds: coldLoads,
      rssEndBytes: process.memoryUsage.rss(),
    };
  } finally {
    await engine.close();
  }
}

const fitsThree = await phase(64e9, 0, true);
if (typeof fitsThree !== 'number') throw new Error('budget probe failed');
const all = await phase(64e9, Number(args['baseline-minutes']));
const tight = await phase(fitsThree, Number(args.minutes));
if (typeof all === 'number' || typeof tight === 'number') throw new Error('phase failed');
const mb = (bytes: number): number => Math.round(bytes / 1e6);
const rows = [all, tight].map((p, i) => ({
  phase: i === 0 ? 'all resident' : 'budget fits 3',
  'budget MB': i === 0 ? Number.NaN : mb(p.budgetBytes),
  requests: p.requests,
  errors: p.errors.length,
  'req/s': p.requestsPerSecond,
  'max resident MB': mb(p.maxResidentBytes),
  loads: p.loads,
  evictions: p.evictions,
  'RSS end MB': mb(p.rssEndBytes),
}));
printTable('model pool soak', rows);
const summary = {
  throughputRatio: tight.requestsPerSecond / all.requestsPerSecond,
  errors: all.errors.length + tight.errors.length,
  residentNeverAboveBudget: tight.maxResidentBytes <= tight.budgetBytes,
  rssEndMinusBudgetMB: mb(tight.rssEndBytes - tight.budgetBytes),
  coldLoadP50Seconds: percentile(tight.coldLoadSeconds, 50),
  coldLoads: tight.coldLoadSeconds.length,
};
printTable('targets: ratio ≥ 0.6, 0 errors, resident ≤ budget, RSS ≤ budget + 300 MB', [
  {
    'throughput ratio': summary.throughputRatio,
    errors: summary.errors,
    'resident ≤ budget': String(summary.residentNeverAboveBudget),
    'RSS - budget MB': summary.rssEndMinusBudgetMB,
    'cold load p50 s (minilm)': summary.coldLoadP50Seconds,
  },
]);
console.log(`\nresults: ${writeResult('soak', { args, engineFrom: args['from-source'] ? 'sources (tsx)' : 'dist (compiled)', models: MODELS.map((m) => m.name), all, tight, summary })}`);
