import { execFileSync } from 'node:child_process';
import { mkdirSync, readdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { REPO_ROOT } from './shared.js';

/** `npm pack --json`'s answer: the tarball's name and the paths it holds. */
const PackJson = z.array(z.looseObject({ filename: z.string(), files: z.array(z.looseObject({ path: z.string() })) }));

/** Parses `npm pack --json` output (anything a script printed before the JSON is skipped). */
export function parsePack(output: string): { filename: string; files: string[] } {
  const [pack] = PackJson.parse(JSON.parse(output.slice(output.indexOf('['))));
  return { filename: pack?.filename ?? '', files: pack?.files.map((file) => file.path) ?? [] };
}

/**
 * An empty project that depends on the tarball `work/filename`, installed offline: the tarball is
 * unpacked as node_modules/shoal and this checkout's other packages are linked beside it (no
 * registry, no npm cache). Returns the project folder.
 */
export function projectWithPacked(work: string, filename: string): string {
  const project = join(work, 'project');
  const modules = join(project, 'node_modules');
  mkdirSync(join(modules, 'shoal'), { recursive: true });
  writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'uses-shoal', private: true, type: 'module', dependencies: { shoal: `file:${filename}` } }));
  for (const name of readdirSync(join(REPO_ROOT, 'node_modules'))) {
    if (name !== 'shoal' && name !== '.bin' && !name.startsWith('.')) symlinkSync(join(REPO_ROOT, 'node_modules', name), join(modules, name));
  }
  execFileSync('tar', ['-xzf', join(work, filename), '-C', join(modules, 'shoal'), '--strip-components=1']);
  return project;
}
