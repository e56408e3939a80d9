import { readFileSync, writeFileSync } from 'node:fs';

/**
 * The write-or-check step of the deploy generators (nats-config.ts, grafana-dashboards.ts):
 * each output is written when its content changed, or, with `check`, reported as stale. Returns
 * the exit code: 1 when checking found a stale file.
 */
export function writeGenerated(outputs: readonly (readonly [path: string, text: string])[], check: boolean, hint: string): number {
  let stale = 0;
  for (const [path, text] of outputs) {
    let current = '';
    try {
      current = readFileSync(path, 'utf8');
    } catch {
      current = '';
    }
    if (current === text) continue;
    stale++;
    if (check) process.stderr.write(`stale: ${path} (${hint})\n`);
    else writeFileSync(path, text);
  }
  return check && stale > 0 ? 1 : 0;
}
