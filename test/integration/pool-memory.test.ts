import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { canReturnFreedMemory } from '../../adapters/runtime/native-memory.js';
import { conformanceDir } from '../helpers/conformance.js';
import { REPO_ROOT, missingReason, sharedAvailable } from '../helpers/shared.js';

/**
 * Eviction really frees memory: the RSS of a process falls back after a model's sessions are
 * released in its thread, both the default way (malloc_trim through the addon in native/, glibc's
 * allocator otherwise untouched) and the fallback (MALLOC_TRIM_THRESHOLD_=0, no addon).
 */

const model = conformanceDir('bench-minilm-l6');
const Report = z.strictObject({ base: z.number(), loaded: z.number(), unloaded: z.number(), reloaded: z.number(), trim: z.boolean() });

describe('memory after eviction', () => {
  if (!sharedAvailable(model)) {
    it.skip(missingReason(model), () => undefined);
    return;
  }
  const cases: { name: string; env: NodeJS.ProcessEnv }[] = [
    { name: 'with malloc_trim after unload (the default)', env: {} },
    { name: 'with MALLOC_TRIM_THRESHOLD_=0 (no addon)', env: { SHOAL_NATIVE_TRIM: '0', MALLOC_TRIM_THRESHOLD_: '0' } },
  ];
  it('has the malloc_trim addon built on Linux (npm install / npm run build)', () => {
    if (process.platform === 'linux') expect(canReturnFreedMemory()).toBe(true);
  });
  for (const { name, env } of cases) {
    it(`returns most of a model's memory to the OS when it is unloaded, ${name}`, () => {
      const childEnv: NodeJS.ProcessEnv = { ...process.env, ...env };
      if (env.MALLOC_TRIM_THRESHOLD_ === undefined) delete childEnv.MALLOC_TRIM_THRESHOLD_;
      const child = spawnSync(process.execPath, ['--import', 'tsx', join(REPO_ROOT, 'test', 'integration', 'scripts', 'rss-after-unload.ts'), model], {
        env: childEnv,
        encoding: 'utf8',
        timeout: 120_000,
      });
      expect(child.status, child.stderr).toBe(0);
      const line = child.stdout.trim().split('\n').at(-1) ?? '';
      const report = Report.parse(JSON.parse(line));
      const grown = report.loaded - report.base;
      const kept = report.unloaded - report.base;
      // A 91 MB fp32 model (prepacked weights, the embedding table mapped from its mapped copy)
      // plus its batch workspace: 95-370 MB while loaded, depending on how eagerly glibc trims
      // and on whether the mapped copy is built in this process (about 240 MB then, 130 MB
      // without; 95 MB in a CI run on a loaded machine with MALLOC_TRIM_THRESHOLD_=0). What
      // matters is that the load shows: more than 60 MB.
      expect(grown).toBeGreaterThan(60e6);
      // After unloading, less than half of that growth and under 80 MB is still resident (V8 and
      // allocator residue of 27-58 MB measured; a model kept resident would keep all of it).
      // With mapped weights the growth itself is smaller (no 90 MB protobuf copy of the weights),
      // so the residue is a larger share of it than the quarter this test used to allow.
      expect(kept).toBeLessThan(Math.min(grown * 0.5, 80e6));
      // And the model loads again after eviction.
      expect(report.reloaded).toBeGreaterThan(report.unloaded);
      expect(report.trim).toBe(env.SHOAL_NATIVE_TRIM === '0' ? false : process.platform === 'linux');
    });
  }
});
