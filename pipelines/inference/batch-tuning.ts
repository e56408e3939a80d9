import { createHash } from 'node:crypto';
import { readFile, stat } from 'node:fs/promises';
import { availableParallelism, cpus } from 'node:os';
import { join } from 'node:path';
import { z } from 'zod';
import { isTunable, type TuningPoint } from '../../adapters/model-threads/batch-tuning.js';
import type { ModelWorker } from '../../adapters/model-threads/model-worker.js';
import type { ModelProfile } from '../../adapters/models/profile.js';
import type { RuntimeOptions } from '../../adapters/runtime/runtime-options.js';
import { writeFileAtomically } from '../../adapters/support/atomic-write.js';

/**
 * `maxBatchTokens: 'auto'`: the batch budget of a model is measured once per machine (CPU model,
 * cores, threads, providers, graph files) and cached in the runtime's cacheDir (SHOAL_CACHE_DIR)/tuning, so a fleet tunes
 * itself to its hardware instead of trusting one fixed number. Items of a short and a long length
 * are timed at each candidate budget; the budget with the best geometric-mean throughput wins.
 */

/** Candidate budgets: 512 is rarely best and 8192 costs a large arena while tuning. */
export const TUNING_BUDGETS = [1024, 2048, 4096];
/** One typical length (a passage): attention cost grows with length, so it shapes the optimum. */
const LENGTHS = [128];
const ROUNDS = 2;
const VERSION = 1;

const Cached = z.strictObject({
  v: z.literal(VERSION),
  budget: z.number().int().positive(),
  points: z.array(z.strictObject({ length: z.number(), budget: z.number(), tokensPerSecond: z.number() })),
});

async function cacheKey(profile: ModelProfile, runtime: RuntimeOptions): Promise<string> {
  const files = await Promise.all(
    Object.values(profile.onnx).map(async (file) => {
      const info = await stat(join(profile.dir, file));
      return [file, info.size, info.mtimeMs];
    }),
  );
  const facts = {
    v: VERSION,
    dir: profile.dir,
    files,
    precision: profile.precision,
    cpu: cpus()[0]?.model ?? 'unknown',
    cores: availableParallelism(),
    threads: runtime.intraOpThreads ?? availableParallelism(),
    providers: runtime.providers,
    lengths: LENGTHS,
    budgets: TUNING_BUDGETS,
  };
  return createHash('sha256').update(JSON.stringify(facts)).digest('hex').slice(0, 32);
}

export function bestBudget(points: readonly TuningPoint[]): number {
  const byBudget = new Map<number, number[]>();
  for (const point of points) byBudget.set(point.budget, [...(byBudget.get(point.budget) ?? []), point.tokensPerSecond]);
  let best = TUNING_BUDGETS[1] ?? 2048;
  let bestScore = -1;
  for (const [budget, rates] of byBudget) {
    const score = Math.exp(rates.reduce((sum, r) => sum + Math.log(Math.max(r, 1e-9)), 0) / rates.length);
    if (score > bestScore) {
      bestScore = score;
      best = budget;
    }
  }
  return best;
}

/** The tuned budget of a loaded model (measured now, or from the cache); null for untunable families. */
export async function tunedBudget(worker: ModelWorker, runtime: RuntimeOptions, cacheDir: string = runtime.cacheDir): Promise<number | null> {
  const profile = worker.profile;
  if (!isTunable(profile)) return null;
  const file = join(cacheDir, 'tuning', `${await cacheKey(profile, runtime)}.json`);
  try {
    return Cached.parse(JSON.parse(await readFile(file, 'utf8'))).budget;
  } catch {
    // Not measured yet on this machine (or an unreadable record): measure below.
  }
  const points = await worker.tune(TUNING_BUDGETS, LENGTHS, ROUNDS);
  const budget = bestBudget(points);
  try {
    await writeFileAtomically(file, `${JSON.stringify({ v: VERSION, budget, points })}\n`);
  } catch {
    // An unwritable cache only means the next process measures again.
  }
  return budget;
}
