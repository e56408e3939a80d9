import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { z } from 'zod';
import { canReturnFreedMemory, returnFreedMemory } from '../adapters/runtime/native-memory.js';
import { ort } from '../adapters/runtime/ort-session.js';
import { SHARED_DIR } from './lib/corpora.js';
import { percentile, printTable, writeResult } from './lib/report.js';

/**
 * What the allocator setting costs and returns: onnxruntime batches of bench-minilm-l6 (a fixed
 * mix of shapes, 16×32 to 2×256 tokens, ORT's CPU arena off as in Shoal) in a fresh process per
 * setting, then the session released:
 * - glibc's defaults (what runs when the malloc_trim addon is built), with malloc_trim(0) after
 *   the release, as Shoal does after an unload;
 * - MALLOC_TRIM_THRESHOLD_=0 (the fallback without the addon);
 * - glibc's defaults with nothing done after the release (what neither remedy gives).
 * Reported: milliseconds per batch (ratio to the defaults, rounds interleaved) and the RSS the
 * process still holds after the release above what it held before the session was created.
 *
 *   npx tsx bench/malloc.ts [--rounds 3] [--seconds 8] [--threads 2]
 */

const { values: args } = parseArgs({
  options: {
    rounds: { type: 'string', default: '3' },
    seconds: { type: 'string', default: '8' },
    threads: { type: 'string', default: '2' },
    child: { type: 'string' },
  },
});

const Measured = z.strictObject({ msPerBatch: z.number(), retainedMb: z.number(), trimmed: z.boolean() });
type Measured = z.infer<typeof Measured>;

const MODEL = join(SHARED_DIR, 'conformance', 'bench-minilm-l6', 'onnx', 'model.onnx');
const SHAPES: readonly (readonly [number, number])[] = [[16, 32], [4, 128], [2, 256], [32, 16], [8, 64]];

async function measure(trim: boolean): Promise<Measured> {
  const rssMb = (): number => process.memoryUsage.rss() / 1e6;
  const before = rssMb();
  const session = await ort.InferenceSession.create(MODEL, { enableCpuMemArena: false, intraOpNumThreads: Number(args.threads) });
  const feeds = SHAPES.map(([batch, length]) => {
    const size = batch * length;
    const feed: Record<string, ort.Tensor> = {
      input_ids: new ort.Tensor('int64', new BigInt64Array(size).fill(1012n), [batch, length]),
      attention_mask: new ort.Tensor('int64', new BigInt64Array(size).fill(1n), [batch, length]),
    };
    if (session.inputNames.includes('token_type_ids')) feed.token_type_ids = new ort.Tensor('int64', new BigInt64Array(size), [batch, length]);
    return feed;
  });
  for (const feed of feeds) await session.run(feed);
  const started = performance.now();
  let batches = 0;
  while (performance.now() - started < Number(args.seconds) * 1000) {
    for (const feed of feeds) {
      await session.run(feed);
      batches++;
    }
  }
  const msPerBatch = (performance.now() - started) / batches;
  await session.release();
  const trimmed = trim && returnFreedMemory();
  await new Promise((resolve) => setTimeout(resolve, 200));
  return { msPerBatch, retainedMb: rssMb() - before, trimmed };
}

interface Setting {
  name: string;
  env: Record<string, string>;
  trim: boolean;
}

const SETTINGS: readonly Setting[] = [
  { name: 'glibc defaults + malloc_trim after release (Shoal)', env: {}, trim: true },
  { name: 'MALLOC_TRIM_THRESHOLD_=0 (fallback)', env: { MALLOC_TRIM_THRESHOLD_: '0' }, trim: false },
  { name: 'glibc defaults, nothing after release', env: {}, trim: false },
];

if (args.child !== undefined) {
  process.stdout.write(`${JSON.stringify(await measure(args.child === 'trim'))}\n`);
} else {
  if (!canReturnFreedMemory()) throw new Error('the malloc_trim addon is not built: run npm run build (needs a C compiler and Linux)');
  const runs = new Map<string, Measured[]>(SETTINGS.map((s) => [s.name, []]));
  const self = fileURLToPath(import.meta.url);
  for (let round = 0; round < Number(args.rounds); round++) {
    // Settings in a different order each round, so drifting load on the machine favours none.
    const order = SETTINGS.map((_, i) => SETTINGS[(i + round) % SETTINGS.length]).filter((s): s is Setting => s !== undefined);
    for (const setting of order) {
      const env: NodeJS.ProcessEnv = { ...process.env, ...setting.env };
      if (setting.env.MALLOC_TRIM_THRESHOLD_ === undefined) delete env.MALLOC_TRIM_THRESHOLD_;
      const child = spawnSync(process.execPath, [...process.execArgv, self, '--child', setting.trim ? 'trim' : 'keep', '--seconds', String(args.seconds), '--threads', String(args.threads)], { env, encoding: 'utf8' });
      if (child.status !== 0) throw new Error(`${setting.name}: ${child.stderr}`);
      runs.get(setting.name)?.push(Measured.parse(JSON.parse(child.stdout.trim().split('\n').at(-1) ?? '')));
    }
  }
  const median = (values: number[]): number => percentile(values, 50);
  const baseline = median((runs.get(SETTINGS[0]?.name ?? '') ?? []).map((m) => m.msPerBatch));
  const rows = SETTINGS.map((setting) => {
    const measured = runs.get(setting.name) ?? [];
    const ms = median(measured.map((m) => m.msPerBatch));
    return {
      setting: setting.name,
      'ms/batch': Math.round(ms * 10) / 10,
      'time vs Shoal': Math.round((ms / baseline) * 100) / 100,
      'RSS kept after release (MB)': Math.round(median(measured.map((m) => m.retainedMb))),
    };
  });
  printTable('allocator settings, bench-minilm-l6 batches (medians of rounds)', rows);
  console.log(`\nresults: ${writeResult('malloc', { args, shapes: SHAPES, rows, runs: Object.fromEntries(runs) })}`);
}
