import { mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { staleSource } from '../../helpers/cli-build.js';

/** The tests' choice between dist/ and the sources for `shoal` child processes (test/helpers/cli-build.ts). */

describe('staleSource', () => {
  const roots: string[] = [];
  afterEach(() => {
    for (const root of roots.splice(0)) rmSync(root, { recursive: true, force: true });
  });

  function repo(): string {
    const root = mkdtempSync(join(tmpdir(), 'shoal-cli-build-'));
    roots.push(root);
    for (const folder of ['adapters/a', 'pipelines', 'services/cli', 'dist/adapters/a', 'dist/pipelines', 'dist/services/cli']) mkdirSync(join(root, folder), { recursive: true });
    return root;
  }

  function file(root: string, path: string, seconds: number): void {
    writeFileSync(join(root, path), '');
    utimesSync(join(root, path), seconds, seconds);
  }

  it('is null when every source has a compiled file no older than it (declarations ignored)', () => {
    const root = repo();
    file(root, 'adapters/a/x.ts', 1_000);
    file(root, 'adapters/a/types.d.ts', 5_000);
    file(root, 'services/cli/main.ts', 1_000);
    file(root, 'dist/adapters/a/x.js', 1_000);
    file(root, 'dist/services/cli/main.js', 2_000);
    expect(staleSource(root)).toBeNull();
  });

  it('names a source edited after the build, and one never compiled', () => {
    const root = repo();
    file(root, 'adapters/a/x.ts', 3_000);
    file(root, 'dist/adapters/a/x.js', 2_000);
    expect(staleSource(root)).toBe(join('adapters', 'a', 'x.ts'));
    file(root, 'dist/adapters/a/x.js', 4_000);
    file(root, 'pipelines/new.ts', 1_000);
    expect(staleSource(root)).toBe(join('pipelines', 'new.ts'));
  });
});
