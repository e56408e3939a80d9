import { execFileSync, spawn } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { FIXTURES_DIR, REPO_ROOT } from '../helpers/shared.js';
import { CLI_FROM_SOURCE } from '../helpers/cli-build.js';

/**
 * Without the malloc_trim addon (SHOAL_NATIVE_TRIM=0 here), bin/shoal.js restarts itself with
 * MALLOC_TRIM_THRESHOLD_=0; if that parent is killed outright,
 * the child must not run on orphaned (a killed worker pod's replacement would share its work).
 */

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function until(check: () => boolean, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (check()) return true;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return check();
}

describe('bin/shoal.js re-execution', () => {
  it('stops the child when the parent is killed with SIGKILL', async () => {
    const env: NodeJS.ProcessEnv = { ...process.env, SHOAL_FROM_SOURCE: CLI_FROM_SOURCE, SHOAL_NATIVE_TRIM: '0' };
    delete env.MALLOC_TRIM_THRESHOLD_;
    const parent = spawn(process.execPath, [join(REPO_ROOT, 'bin', 'shoal.js'), 'encode', '--model', join(FIXTURES_DIR, 'models', 'tiny-bert-mean')], {
      env,
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let childPid = 0;
    const findChild = (): boolean => {
      try {
        childPid = Number(execFileSync('pgrep', ['-P', String(parent.pid)], { encoding: 'utf8' }).trim().split('\n')[0]);
      } catch {
        childPid = 0;
      }
      return childPid > 0;
    };
    expect(await until(findChild, 20_000)).toBe(true);
    parent.kill('SIGKILL');
    expect(await until(() => !alive(childPid), 10_000)).toBe(true);
  });
});
