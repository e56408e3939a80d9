import { describe, expect, it } from 'vitest';
import type { ShoalError } from '../../../../adapters/protocol/errors.js';
import { NO_PARSE_WORKER, ParseWatchdog } from '../../../../pipelines/documents/parse-watchdog.js';

/**
 * The watchdog's clock, with a probe the test controls (the real probe, the parse consumer's
 * info, is exercised by test/integration/ingest-nats-operations.test.ts): a warning once after
 * warnAfterMs without a worker, UNAVAILABLE after failAfterMs, a worker seen resets both, and
 * nothing is checked while no document waits.
 */

interface Run {
  warnings: string[];
  timeouts: ShoalError[];
  probes: number;
}

function watch(options: { seen: () => boolean; waiting?: () => number; failAfterMs?: number }): { dog: ParseWatchdog; run: Run } {
  const run: Run = { warnings: [], timeouts: [], probes: 0 };
  const dog = new ParseWatchdog({
    probe: async () => {
      run.probes += 1;
      return options.seen();
    },
    waiting: options.waiting ?? (() => 3),
    warnAfterMs: 100,
    failAfterMs: options.failAfterMs ?? 400,
    intervalMs: 10,
    onWarning: (message) => run.warnings.push(message),
    onTimeout: (error) => run.timeouts.push(error),
  });
  return { dog, run };
}

const until = async (check: () => boolean, ms = 3_000): Promise<void> => {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error('condition not reached');
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
};

describe('ParseWatchdog', () => {
  it('warns once, then fails with UNAVAILABLE naming the setting, and stops checking', async () => {
    const { dog, run } = watch({ seen: () => false });
    const started = performance.now();
    dog.start();
    await until(() => run.timeouts.length > 0);
    const elapsed = performance.now() - started;
    expect(elapsed).toBeGreaterThanOrEqual(400);
    expect(run.warnings).toHaveLength(1);
    expect(run.warnings[0]).toContain(NO_PARSE_WORKER);
    expect(run.timeouts[0]?.code).toBe('UNAVAILABLE');
    expect(run.timeouts[0]?.message).toContain('SHOAL_PARSE_WORKER_TIMEOUT_MS=400');
    const probes = run.probes;
    await new Promise((resolve) => setTimeout(resolve, 60));
    expect(run.probes).toBe(probes);
    expect(run.timeouts).toHaveLength(1);
  });

  it('a worker seen resets the clock: no warning, no failure while it is there', async () => {
    let seen = false;
    const { dog, run } = watch({ seen: () => seen, failAfterMs: 300 });
    dog.start();
    // Absent for 60 ms (under warnAfterMs), then present for 500 ms: longer than failAfterMs in all.
    await new Promise((resolve) => setTimeout(resolve, 60));
    seen = true;
    await new Promise((resolve) => setTimeout(resolve, 500));
    dog.stop();
    expect(run.warnings).toEqual([]);
    expect(run.timeouts).toEqual([]);
    expect(run.probes).toBeGreaterThan(10);
  });

  it('checks nothing while no document waits', async () => {
    const { dog, run } = watch({ seen: () => false, waiting: () => 0, failAfterMs: 100 });
    dog.start();
    await new Promise((resolve) => setTimeout(resolve, 250));
    dog.stop();
    expect(run).toEqual({ warnings: [], timeouts: [], probes: 0 });
  });
});
