import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ModelThreads, ModelWorker } from '../../../../adapters/model-threads/model-worker.js';
import { PrepPool } from '../../../../adapters/model-threads/prep-pool.js';
import { resolveRuntimeOptions } from '../../../../adapters/runtime/runtime-options.js';
import { FIXTURES_DIR } from '../../../helpers/shared.js';

/**
 * Model threads are reused: a closed model releases its session and gives its thread back, the
 * next model loads in it (no thread start-up per load), and a thread whose sessions ran at a
 * higher nice value is never handed to a load that must run at a lower one.
 */

const prep = new PrepPool();
const threads = new ModelThreads(1);
afterAll(async () => {
  await threads.close();
  await prep.close();
});

async function encodeOnce(worker: ModelWorker, text: string): Promise<number[]> {
  const prepared = await prep.prepare(worker.profile, { task: 'encode', items: [{ text, role: 'document' }], maxLength: worker.profile.maxLength });
  const { outputs } = await worker.run(prepared, { outputs: ['dense'] });
  const first = outputs[0];
  // Vectors leave the model thread as Float32Array (moved, not copied).
  return first?.dense instanceof Float32Array ? Array.from(first.dense) : [];
}

describe('model thread reuse', () => {
  it('loads the next model in the thread of a closed one, with the same results as a fresh thread', async () => {
    const runtime = resolveRuntimeOptions({ intraOpThreads: 1 });
    const bert = await prep.describe('bert', join(FIXTURES_DIR, 'models', 'tiny-bert-mean'), {});
    const roberta = await prep.describe('roberta', join(FIXTURES_DIR, 'models', 'tiny-roberta-mean'), {});
    const give = threads.recycler(runtime.nice);

    const first = await threads.take('bert', runtime.nice);
    const { worker: bertWorker } = await ModelWorker.start(bert, runtime, first, give);
    await encodeOnce(bertWorker, 'a dog');
    const before = threads.readyCount;
    await bertWorker.close({ reuseThread: true });
    expect(threads.readyCount).toBe(before + 1);

    // Same nice value: the thread given back is taken first, ahead of the fresh spare.
    const reused = await threads.take('roberta', runtime.nice);
    expect(reused).toBe(first);
    const { worker: robertaWorker } = await ModelWorker.start(roberta, runtime, reused, give);
    const { worker: fresh } = await ModelWorker.start(roberta, runtime);
    try {
      const inReused = await encodeOnce(robertaWorker, 'the cat sat');
      expect(inReused.length).toBeGreaterThan(0);
      expect(inReused).toEqual(await encodeOnce(fresh, 'the cat sat'));
    } finally {
      await fresh.close();
      // Without reuseThread (an explicit unload), the thread stops.
      await robertaWorker.close();
      expect(reused.alive).toBe(false);
    }
  });

  it('keeps at most one thread over the spare count and never lowers a thread nice value', async () => {
    const bulk = resolveRuntimeOptions({ intraOpThreads: 1, nice: 10 });
    const profile = await prep.describe('bert', join(FIXTURES_DIR, 'models', 'tiny-bert-mean'), {});
    while (threads.readyCount > 0) await (await threads.take('drain')).close();

    const a = await threads.take('a', 10);
    const b = await threads.take('b', 10);
    const c = await threads.take('c', 10);
    const workers = await Promise.all([a, b, c].map(async (thread) => (await ModelWorker.start(profile, bulk, thread, threads.recycler(10))).worker));
    for (const worker of workers) await worker.close({ reuseThread: true });
    // Spare count 1: two kept (a, b), the third stopped.
    expect(threads.readyCount).toBe(2);
    expect(c.alive).toBe(false);

    // A load at nice 0 does not get the nice-10 thread; a load at nice 10 does.
    const interactive = await threads.take('interactive', 0);
    expect([a, b]).not.toContain(interactive);
    await interactive.close();
    const again = await threads.take('bulk again', 10);
    expect(again).toBe(a);
    await again.close();
    await (await threads.take('rest', 10)).close();
  });

  it('starts no thread once closed, and stops a spare taken while it was closing', async () => {
    const own = new ModelThreads(1);
    // Taken while the spare is still starting, then closed before it is ready.
    const taking = own.take('late');
    await own.close();
    await expect(taking).rejects.toMatchObject({ code: 'UNAVAILABLE' });
    // A thread started after close() would never be stopped, and dies at process exit, possibly
    // in the middle of creating a session, which aborts the process.
    await expect(own.take('after close')).rejects.toMatchObject({ code: 'UNAVAILABLE' });
    expect(own.readyCount).toBe(0);
  });

  it('prestarts one thread for a load when none is ready, which the load takes or gives up', async () => {
    // Spares 0, as in a one-shot CLI command: nothing is started until a load asks.
    const own = new ModelThreads(0);
    try {
      expect(own.readyCount).toBe(0);
      const giveUp = own.prestart();
      expect(own.readyCount).toBe(1);
      // Only one at a time: a second load while the first thread starts starts none of its own.
      const noop = own.prestart();
      expect(own.readyCount).toBe(1);
      const taken = await own.take('model', 0);
      expect(taken.alive).toBe(true);
      expect(own.readyCount).toBe(0);
      // Taken: giving up is a no-op, the thread stays with its model.
      await giveUp();
      await noop();
      expect(taken.alive).toBe(true);
      await taken.close();

      // A load that fails before taking its thread (detection failed) stops it: beyond spares 0.
      const failed = own.prestart();
      expect(own.readyCount).toBe(1);
      await failed();
      expect(own.readyCount).toBe(0);
    } finally {
      await own.close();
    }
    // With a spare ready, nothing more is started.
    const spare = new ModelThreads(1);
    try {
      const giveUp = spare.prestart();
      expect(spare.readyCount).toBe(1);
      await giveUp();
      expect(spare.readyCount).toBe(1);
    } finally {
      await spare.close();
    }
  });
});
