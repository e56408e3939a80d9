import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ModelWorker } from '../../../../adapters/model-threads/model-worker.js';
import { PrepPool } from '../../../../adapters/model-threads/prep-pool.js';
import { resolveRuntimeOptions } from '../../../../adapters/runtime/runtime-options.js';
import { bestBudget, TUNING_BUDGETS, tunedBudget } from '../../../../pipelines/inference/batch-tuning.js';
import { FIXTURES_DIR } from '../../../helpers/shared.js';

const prep = new PrepPool();
const cache = mkdtempSync(join(tmpdir(), 'shoal-tuning-'));
afterAll(async () => {
  await prep.close();
  rmSync(cache, { recursive: true, force: true });
});

describe('batch budget tuning', () => {
  it('picks the budget with the best geometric-mean throughput over lengths', () => {
    expect(
      bestBudget([
        { budget: 1024, length: 64, tokensPerSecond: 100 },
        { budget: 1024, length: 256, tokensPerSecond: 400 },
        { budget: 2048, length: 64, tokensPerSecond: 190 },
        { budget: 2048, length: 256, tokensPerSecond: 220 },
      ]),
    ).toBe(2048);
  });

  it('measures a loaded model once, caches the result, and keeps the model usable', async () => {
    const profile = await prep.describe('tiny', join(FIXTURES_DIR, 'models', 'tiny-bert-mean'), {});
    const runtime = resolveRuntimeOptions({ intraOpThreads: 1 });
    const { worker } = await ModelWorker.start(profile, runtime);
    try {
      const budget = await tunedBudget(worker, runtime, cache);
      expect(TUNING_BUDGETS).toContain(budget);
      const files = readdirSync(join(cache, 'tuning'));
      expect(files).toHaveLength(1);
      const record = z
        .looseObject({ budget: z.number(), points: z.array(z.looseObject({ budget: z.number(), tokensPerSecond: z.number() })) })
        .parse(JSON.parse(readFileSync(join(cache, 'tuning', files[0] ?? ''), 'utf8')));
      expect(record.budget).toBe(budget);
      expect(record.points.map((p) => p.budget).sort((a, b) => a - b)).toEqual([...TUNING_BUDGETS]);
      for (const point of record.points) expect(point.tokensPerSecond).toBeGreaterThan(0);
      // The second call reads the cache: the same answer, no new record.
      expect(await tunedBudget(worker, runtime, cache)).toBe(budget);
      expect(readdirSync(join(cache, 'tuning'))).toHaveLength(1);
      // The session was recreated after tuning and still runs.
      const prepared = await prep.prepare(profile, { task: 'encode', items: [{ text: 'hello the', role: 'document' }], maxLength: profile.maxLength });
      const result = await worker.run(prepared, { outputs: ['dense'] });
      expect(result.outputs[0]?.dense?.length).toBeGreaterThan(0);
    } finally {
      await worker.close();
    }
  });

  it('declines families whose inputs are not plain token sequences', async () => {
    const profile = await prep.describe('ner', join(FIXTURES_DIR, 'models', 'tiny-ner'), {});
    const runtime = resolveRuntimeOptions({ intraOpThreads: 1 });
    const { worker } = await ModelWorker.start(profile, runtime);
    try {
      expect(await tunedBudget(worker, runtime, cache)).toBeNull();
    } finally {
      await worker.close();
    }
  });
});
