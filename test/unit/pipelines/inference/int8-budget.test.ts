import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { parseCatalog } from '../../../../pipelines/inference/catalog.js';
import { InferenceEngine } from '../../../../pipelines/inference/engine.js';
import { INT8_BATCH_TOKENS } from '../../../../pipelines/inference/engine-options.js';
import type { BatchEvent } from '../../../../pipelines/inference/scheduler-options.js';
import { FIXTURES_DIR } from '../../../helpers/shared.js';

/**
 * The batch budget follows the precision a model runs in: 512 padded tokens for int8 when no
 * budget is configured, the engine's 2,048 for fp32, and a configured budget for both.
 */

const TINY = join(FIXTURES_DIR, 'models', 'tiny-bert-mean');
/** 300 items of 6-8 tokens: 2,000+ tokens, several 512-token batches. */
const ITEMS = Array.from({ length: 300 }, (_, i) => `item ${i} is a short text`);

let cacheDir: string;
const engines: InferenceEngine[] = [];

function engineWith(events: BatchEvent[], maxBatchTokens?: number): InferenceEngine {
  const catalog = parseCatalog(
    {
      models: {
        int8: { source: TINY, precision: 'int8', quantization: { min_weight_elements: 0, min_cosine: 0.9 } },
        fp32: { source: TINY, precision: 'fp32' },
      },
    },
    'int8 budget test',
  );
  const engine = new InferenceEngine({
    catalog,
    runtime: { intraOpThreads: 1, cacheDir },
    interactiveSessions: false,
    ...(maxBatchTokens === undefined ? {} : { maxBatchTokens }),
    hooks: { scheduler: { onBatch: (event) => events.push(event) } },
  });
  engines.push(engine);
  return engine;
}

beforeAll(() => {
  cacheDir = mkdtempSync(join(tmpdir(), 'shoal-int8-budget-'));
});
afterAll(async () => {
  for (const engine of engines) await engine.close();
  rmSync(cacheDir, { recursive: true, force: true });
});

const largest = (events: readonly BatchEvent[], model: string): number => Math.max(...events.filter((e) => e.model === model).map((e) => e.paddedTokens));

it('int8 models get the int8 budget, fp32 the engine default, unless a budget is configured', async () => {
  const events: BatchEvent[] = [];
  const engine = engineWith(events);
  expect((await engine.inspect('int8')).info.precision?.model?.effective).toBe('int8');
  await engine.encode({ model: 'int8', items: ITEMS, priority: 'bulk' });
  await engine.encode({ model: 'fp32', items: ITEMS, priority: 'bulk' });
  expect(largest(events, 'int8')).toBeLessThanOrEqual(INT8_BATCH_TOKENS);
  expect(largest(events, 'fp32')).toBeGreaterThan(INT8_BATCH_TOKENS);

  const configured: BatchEvent[] = [];
  const explicit = engineWith(configured, 4096);
  await explicit.encode({ model: 'int8', items: ITEMS, priority: 'bulk' });
  expect(largest(configured, 'int8')).toBeGreaterThan(INT8_BATCH_TOKENS);
});
