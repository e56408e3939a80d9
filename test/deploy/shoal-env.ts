import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { REPO_ROOT } from '../helpers/shared.js';

/**
 * The environment variables Shoal's code reads, found by scanning its sources (services, adapters,
 * pipelines, bin) for the names as string literals or `env.NAME` accesses. A deployment file that
 * sets a variable not in this set sets something nothing reads (a typo, or a setting that moved).
 */

const SOURCE_DIRS = ['services', 'adapters', 'pipelines', 'bin'];
/** Read by libraries or the runtime, not by Shoal's own code (AWS_REGION: the AWS SDK's region chain). */
const EXTERNAL = new Set(['NODE_ENV', 'MALLOC_TRIM_THRESHOLD_', 'AWS_REGION']);

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return files(path);
    return /\.(ts|js|mjs)$/.test(name) ? [path] : [];
  });
}

let cached: Set<string> | null = null;

export function envVariablesShoalReads(): Set<string> {
  if (cached !== null) return cached;
  const names = new Set<string>(EXTERNAL);
  for (const dir of SOURCE_DIRS) {
    for (const file of files(join(REPO_ROOT, dir))) {
      const text = readFileSync(file, 'utf8');
      for (const match of text.matchAll(/\b((?:SHOAL|NATS|HF)_[A-Z0-9_]+)\b/g)) if (match[1] !== undefined) names.add(match[1]);
    }
  }
  cached = names;
  return names;
}
