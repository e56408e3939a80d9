import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parseCatalog } from '../../../../pipelines/inference/catalog.js';
import { InferenceEngine } from '../../../../pipelines/inference/engine.js';
import { FIXTURES_DIR } from '../../../helpers/shared.js';

/**
 * Per-model runtime overrides change only what they name: a profile must never carry runtime
 * defaults that would replace the engine's settings (a CUDA engine silently running on CPU).
 * Bulk sessions run at the configured nice value, interactive ones at the process's.
 */

const model = join(FIXTURES_DIR, 'models', 'tiny-bert-mean');
const engine = new InferenceEngine({
  runtime: { intraOpThreads: 1 },
  bulkNice: 7,
  catalog: parseCatalog({ models: { tuned: { source: model, runtime: { intraOpThreads: 2 } } } }, 'test'),
});
afterAll(async () => {
  await engine.close();
});

function niceValues(): number[] {
  return readdirSync('/proc/self/task').map((tid) => {
    const stat = readFileSync(`/proc/self/task/${tid}/stat`, 'utf8');
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[16]);
  });
}

describe('runtime overrides', () => {
  it('keeps only the keys a catalog entry sets', async () => {
    expect((await engine.profile(model)).runtime).toEqual({});
    expect((await engine.profile('tuned')).runtime).toEqual({ intraOpThreads: 2 });
  });

  it('runs bulk sessions at the bulk nice value (Linux per-thread priority)', async () => {
    const before = niceValues().filter((n) => n === 7).length;
    await engine.encode({ model, items: ['hello the'], priority: 'bulk' });
    expect(niceValues().filter((n) => n === 7).length).toBeGreaterThan(before);
  });
});
