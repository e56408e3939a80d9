import { describe, expect, it } from 'vitest';
import { checkedLineCount, steadyTokensPerSecond, type CliTiming } from '../../../bench/lib/cli-run.js';

/** The steady-state throughput of bench/throughput.ts --steady K (issue 40 item 1). */

const timing = (outputLines: number, seconds: number): CliTiming => ({ seconds, firstOutputSeconds: 0.5, lastOutputSeconds: seconds - 0.05, outputBytes: outputLines * 100, outputLines });

describe('steady-state CLI throughput', () => {
  it('is the extra tokens over the extra time, so start-up, load and exit cancel out', () => {
    // 1.0 s of start-up and exit in both runs, then 10,000 tokens/s of work.
    const short = { tokens: 118_154, seconds: 1.0 + 118_154 / 10_000 };
    const long = { tokens: 4 * 118_154, seconds: 1.0 + (4 * 118_154) / 10_000 };
    expect(steadyTokensPerSecond(short, long)).toBeCloseTo(10_000, 6);
    // Whole-run rates understate it: the start-up is charged to the work.
    expect(short.tokens / short.seconds).toBeLessThan(9_300);
  });

  it('gives no rate for runs that do not grow in tokens and time', () => {
    expect(steadyTokensPerSecond({ tokens: 100, seconds: 2 }, { tokens: 100, seconds: 3 })).toBeNaN();
    expect(steadyTokensPerSecond({ tokens: 100, seconds: 3 }, { tokens: 400, seconds: 2 })).toBeNaN();
  });

  it('refuses a run whose output line count differs from its input count', () => {
    expect(checkedLineCount(timing(6_400, 40), 6_400, 'shoal encode fp32').seconds).toBe(40);
    expect(() => checkedLineCount(timing(6_399, 40), 6_400, 'shoal encode fp32')).toThrow(/wrote 6399 lines for 6400 inputs: refused/);
    expect(() => checkedLineCount(timing(6_401, 40), 6_400, 'shoal encode int8')).toThrow(/refused/);
  });
});
