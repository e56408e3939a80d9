import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * Locations of the shared kit (`../shared` beside the repository, or SHOAL_SHARED_DIR). Tests that
 * need it report as skipped, with the reason, when it is absent.
 */

export const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const SHARED_DIR = process.env.SHOAL_SHARED_DIR ?? resolve(REPO_ROOT, '..', 'shared');
export const CONFORMANCE_DIR = join(SHARED_DIR, 'conformance');
export const DATA_DIR = join(SHARED_DIR, 'data');
export const FIXTURES_DIR = join(REPO_ROOT, 'test', 'fixtures');

export function sharedAvailable(path: string): boolean {
  return existsSync(path);
}

export function missingReason(path: string): string {
  return `skipped: ${path} not found (the shared kit is not beside this checkout; set SHOAL_SHARED_DIR)`;
}

export function readJson(path: string): unknown {
  return JSON.parse(readFileSync(path, 'utf8'));
}
