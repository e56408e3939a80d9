import { readFileSync } from 'node:fs';
import { z } from 'zod';

/**
 * Shoal's version (`shoal --version`, TEI's /info): from package.json two folders up (sources) or
 * three (dist/). Read once; 'unknown' when neither is Shoal's (an unusual install).
 */

const PackageJson = z.looseObject({ name: z.string(), version: z.string().max(64) });

function readVersion(): string {
  for (const relative of ['../../package.json', '../../../package.json']) {
    let text: string;
    try {
      text = readFileSync(new URL(relative, import.meta.url), 'utf8');
    } catch {
      // Not at this level (sources vs dist/): try the next.
      continue;
    }
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      continue;
    }
    const parsed = PackageJson.safeParse(json);
    if (parsed.success && parsed.data.name === 'shoal') return parsed.data.version;
  }
  return 'unknown';
}

let version: string | null = null;

export function shoalVersion(): string {
  version ??= readVersion();
  return version;
}
