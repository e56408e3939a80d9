import { totalmem } from 'node:os';
import { describe, expect, it } from 'vitest';
import { ErrorCode, hasErrorCode } from '../../../../adapters/protocol/errors.js';
import { defaultMemoryBudget, formatBytes, parseBytes } from '../../../../pipelines/inference/memory.js';

describe('memory sizes', () => {
  it('parses bytes, SI and binary units, and shares of RAM', () => {
    expect(parseBytes('123456')).toBe(123456);
    expect(parseBytes('2GiB')).toBe(2 * 1024 ** 3);
    expect(parseBytes('512MB')).toBe(512e6);
    expect(parseBytes('1.5g')).toBe(1.5e9);
    expect(parseBytes(' 64 KiB ')).toBe(65536);
    expect(parseBytes('60%', 1000)).toBe(600);
    expect(formatBytes(3 * 1024 ** 3)).toBe('3.00 GiB');
  });

  it('refuses what is not a size with CONFIG_INVALID and an example', () => {
    for (const bad of ['two gigs', '-5GB', '5 parsecs', '']) {
      let error: unknown;
      try {
        parseBytes(bad);
      } catch (e) {
        error = e;
      }
      expect(hasErrorCode(error, ErrorCode.CONFIG_INVALID)).toBe(true);
      expect(String(error)).toContain('2GiB');
    }
  });

  it('defaults to half the memory on CPU, and falls back to it when no GPU can be read', () => {
    const cpu = defaultMemoryBudget(['cpu']);
    expect(cpu).toBeGreaterThan(0);
    expect(cpu).toBeLessThanOrEqual(totalmem() / 2);
    // No nvidia-smi on this machine: a CUDA configuration gets the host-based default.
    expect(defaultMemoryBudget(['cuda', 'cpu'])).toBe(cpu);
  });
});
