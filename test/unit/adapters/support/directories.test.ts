import { mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { makeDirectory } from '../../../../adapters/support/directories.js';

/**
 * makeDirectory is `mkdir -p` that always settles: Node 20's recursive mkdir spins forever when a
 * parent refuses with ENOENT (/proc), which hung `shoal encode` with SHOAL_CACHE_DIR there.
 */

const root = mkdtempSync(join(tmpdir(), 'shoal-dirs-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('makeDirectory', () => {
  it('creates every missing level, and accepts a folder that exists', async () => {
    const deep = join(root, 'a', 'b', 'c');
    await makeDirectory(deep);
    expect(statSync(deep).isDirectory()).toBe(true);
    await makeDirectory(deep);
    await makeDirectory(root);
  });

  it('lets concurrent calls create the same folders', async () => {
    const deep = join(root, 'x', 'y', 'z');
    await Promise.all(Array.from({ length: 8 }, () => makeDirectory(deep)));
    expect(statSync(deep).isDirectory()).toBe(true);
  });

  it('refuses a path through a file with ENOTDIR', async () => {
    writeFileSync(join(root, 'file'), 'not a folder');
    await expect(makeDirectory(join(root, 'file', 'below'))).rejects.toMatchObject({ code: 'ENOTDIR' });
    await expect(makeDirectory(join(root, 'file'))).rejects.toMatchObject({ code: 'ENOTDIR' });
  });

  it.runIf(process.platform === 'linux')('fails at once under /proc, where Node 20 recursive mkdir never returns', async () => {
    const started = performance.now();
    await expect(makeDirectory('/proc/shoal-no-such/cache/mapped')).rejects.toMatchObject({ code: 'ENOENT' });
    expect(performance.now() - started).toBeLessThan(1_000);
  });
});
