import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { conformanceDir } from '../helpers/conformance.js';
import { REPO_ROOT, missingReason, sharedAvailable } from '../helpers/shared.js';

/**
 * Eviction really frees memory: with MALLOC_TRIM_THRESHOLD_=0 (set by bin/shoal.js for every Shoal
 * process) the RSS of a process falls back after a model's sessions are released in its thread.
 */

const model = conformanceDir('bench-minilm-l6');
const Report = z.strictObject({ base: z.number(), loaded: z.number(), unloaded: z.number(), reloaded: z.number() });

describe('memory after eviction', () => {
  if (!sharedAvailable(model)) {
    it.skip(missingReason(model), () => undefined);
    return;
  }
  it('returns most of a model\'s memory to the OS when it is unloaded', () => {
    const child = spawnSync(process.execPath, ['--import', 'tsx', join(REPO_ROOT, 'test', 'integration', 'scripts', 'rss-after-unload.ts'), model], {
      env: { ...process.env, MALLOC_TRIM_THRESHOLD_: '0' },
      encoding: 'utf8',
      timeout: 120_000,
    });
    expect(child.status, child.stderr).toBe(0);
    const line = child.stdout.trim().split('\n').at(-1) ?? '';
    const report = Report.parse(JSON.parse(line));
    const grown = report.loaded - report.base;
    const kept = report.unloaded - report.base;
    // A 91 MB fp32 model plus its batch workspace: hundreds of MB while loaded.
    expect(grown).toBeGreaterThan(150e6);
    // After unloading, at most a quarter of that growth is still resident.
    expect(kept).toBeLessThan(grown * 0.25);
    // And the model loads again after eviction.
    expect(report.reloaded).toBeGreaterThan(report.unloaded);
  });
});
