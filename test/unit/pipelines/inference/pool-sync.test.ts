import { describe, expect, it } from 'vitest';
import { ChangeSignal, ExclusiveSections } from '../../../../pipelines/inference/pool-sync.js';

describe('ExclusiveSections', () => {
  it('runs sections one at a time in the order asked, a failed one not blocking the next', async () => {
    const sections = new ExclusiveSections();
    const log: string[] = [];
    const section = (name: string, ms: number, fail = false) => async (): Promise<string> => {
      log.push(`${name} in`);
      await new Promise((resolve) => setTimeout(resolve, ms));
      log.push(`${name} out`);
      if (fail) throw new Error(name);
      return name;
    };
    const a = sections.run(section('a', 20));
    const b = sections.run(section('b', 1, true));
    const c = sections.run(section('c', 1));
    expect(await a).toBe('a');
    await expect(b).rejects.toThrow('b');
    expect(await c).toBe('c');
    expect(log).toEqual(['a in', 'a out', 'b in', 'b out', 'c in', 'c out']);
  });
});

describe('ChangeSignal', () => {
  it('wakes every waiter at the next notify, long before their timeout', async () => {
    const signal = new ChangeSignal();
    const started = performance.now();
    const waits = [signal.wait(10_000), signal.wait(10_000)];
    setTimeout(() => signal.notify(), 10);
    await Promise.all(waits);
    expect(performance.now() - started).toBeLessThan(5_000);
  });

  it('resolves after the timeout without a notify, and a later notify wakes only later waiters', async () => {
    const signal = new ChangeSignal();
    const started = performance.now();
    await signal.wait(30);
    expect(performance.now() - started).toBeGreaterThanOrEqual(25);
    signal.notify();
    let woke = false;
    const next = signal.wait(10_000).then(() => (woke = true));
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(woke).toBe(false);
    signal.notify();
    await next;
    expect(woke).toBe(true);
  });
});
