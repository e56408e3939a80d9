import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { conformanceDir } from '../helpers/conformance.js';
import { REPO_ROOT, missingReason, sharedAvailable } from '../helpers/shared.js';

/**
 * A process that closes the engine while the interactive lane's second session is still being
 * created, then exits, must exit cleanly: close() waits for that session and releases it (pool.ts,
 * ensureInteractive / close). Without that, the exit killed the model thread inside onnxruntime's
 * session creation and the process aborted (exit 134, "Napi::Error"). The scenario is timing-bound,
 * so it runs several times: before the fix nearly every run aborted (9-10 of 10 here).
 */

const model = conformanceDir('bench-minilm-l6');
const small = conformanceDir('xlmr-mean-embed');
const RUNS = 6;

describe('exit after an interactive request', () => {
  if (!sharedAvailable(model) || !sharedAvailable(small)) {
    it.skip(missingReason(model), () => undefined);
    return;
  }
  it(`exits cleanly when the engine is closed while the interactive session is being created (${RUNS} runs)`, () => {
    const started = Date.now();
    const failures: string[] = [];
    for (let run = 1; run <= RUNS; run++) {
      // Bounded so that the whole test stays under a minute even on a slow machine.
      if (Date.now() - started > 45_000) break;
      const child = spawnSync(process.execPath, ['--import', 'tsx', join(REPO_ROOT, 'test', 'integration', 'scripts', 'interactive-close-exit.ts'), model, small], {
        encoding: 'utf8',
        timeout: 30_000,
      });
      const ok = child.status === 0 && child.signal === null && child.stdout.includes('"items":1') && !child.stderr.includes('Napi::Error');
      if (!ok) failures.push(`run ${run}: status ${child.status} signal ${child.signal}: ${child.stderr.trim().slice(-400)}`);
    }
    expect(failures).toEqual([]);
  }, 60_000);
});
