import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { PrepPool } from '../../../../adapters/model-threads/prep-pool.js';
import { FIXTURES_DIR } from '../../../helpers/shared.js';

/**
 * Interactive work (a search query) is tokenized on a prep thread of its own, so that it never
 * waits behind a bulk chunk, except where there is no bulk work to wait behind: a CLI command
 * (engine option interactiveSessions: false). There the query goes to the model's one thread,
 * which bin/shoal.js started early, instead of starting a second thread and importing the
 * tokenizers again on the command's critical path (~0.3 s of `shoal search`).
 */

const MODEL = join(FIXTURES_DIR, 'models', 'tiny-bert-mean');
const pools: PrepPool[] = [];
afterEach(async () => {
  await Promise.all(pools.splice(0).map((pool) => pool.close()));
});

async function prepareBoth(pool: PrepPool): Promise<string[]> {
  const profile = await pool.describe('bert', MODEL, {});
  const request = { task: 'encode' as const, items: [{ text: 'a query about tides', role: 'query' as const }], maxLength: profile.maxLength };
  const bulk = await pool.prepare(profile, request, 'bulk');
  const interactive = await pool.prepare(profile, request, 'interactive');
  return [JSON.stringify(bulk), JSON.stringify(interactive)];
}

describe('prep pool lanes', () => {
  it('gives interactive work a thread of its own by default', async () => {
    const pool = new PrepPool();
    pools.push(pool);
    const [bulk, interactive] = await prepareBoth(pool);
    expect(pool.threadCount).toBe(2);
    expect(interactive).toBe(bulk);
  }, 60_000);

  it('keeps interactive work on the model\'s bulk thread without an interactive thread (one caller)', async () => {
    const pool = new PrepPool({ interactiveThread: false });
    pools.push(pool);
    const [bulk, interactive] = await prepareBoth(pool);
    expect(pool.threadCount).toBe(1);
    expect(interactive).toBe(bulk);
  }, 60_000);
});
