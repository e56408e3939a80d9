import type { Engine } from '../../adapters/protocol/engine.js';
import { ErrorCode, ShoalError } from '../../adapters/protocol/errors.js';

/**
 * What the document-bomb tests (PDF, ZIP containers) share: a parser whose engine must never be
 * called (a bomb fails before any OCR or encoding), and the peak memory a parse added.
 */

const refused = (what: string) => (): Promise<never> => Promise.reject(new ShoalError(ErrorCode.UNSUPPORTED_OPERATION, `${what} in this test`));

/** No engine call is expected: any call is a failure of the test. */
export const NO_ENGINE: Engine = {
  encode: refused('no encode'),
  score: refused('no score'),
  extract: refused('no OCR'),
  tokenize: refused('no tokenize'),
  close: async () => undefined,
};

/** Peak resident memory above the level at the start, sampled every 10 ms while `work` runs. */
export async function peakGrowth<T>(work: () => Promise<T>): Promise<{ result: T; megabytes: number }> {
  const base = process.memoryUsage.rss();
  let peak = base;
  const timer = setInterval(() => {
    peak = Math.max(peak, process.memoryUsage.rss());
  }, 10);
  try {
    const result = await work();
    peak = Math.max(peak, process.memoryUsage.rss());
    return { result, megabytes: (peak - base) / 2 ** 20 };
  } finally {
    clearInterval(timer);
  }
}
