import { readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';

/**
 * What a models directory holds (SHOAL_MODEL_DIR: `org/name/` or `name/` folders), for the
 * worker's "serve everything found", `shoal models list` and the close names a mistyped model
 * id is answered with. A folder counts as a model when it has a config or an ONNX graph.
 */

const MODEL_FILES = ['config.json', 'modules.json', 'onnx', 'model.onnx'];

async function isDir(path: string): Promise<boolean> {
  return stat(path).then((s) => s.isDirectory(), () => false);
}

async function looksLikeModel(dir: string): Promise<boolean> {
  const entries = await readdir(dir).catch((): string[] => []);
  return entries.some((name) => MODEL_FILES.includes(name) || name.endsWith('.onnx'));
}

/** Model folders under a models dir, as the ids the sources resolve them by (`org/name` or `name`), sorted. */
export async function modelsInDir(root: string): Promise<string[]> {
  const found: string[] = [];
  const top = await readdir(root, { withFileTypes: true }).catch(() => []);
  for (const entry of top) {
    if (entry.name.startsWith('.')) continue;
    const dir = join(root, entry.name);
    if (!(await isDir(dir))) continue;
    if (await looksLikeModel(dir)) {
      found.push(entry.name);
      continue;
    }
    for (const inner of await readdir(dir, { withFileTypes: true }).catch(() => [])) {
      if (!inner.name.startsWith('.') && (await isDir(join(dir, inner.name))) && (await looksLikeModel(join(dir, inner.name)))) {
        found.push(`${entry.name}/${inner.name}`);
      }
    }
  }
  return found.sort();
}

/** The models directories that do not exist (or are not folders): a typo there hides every model. */
export async function missingModelDirs(dirs: readonly string[]): Promise<string[]> {
  const missing: string[] = [];
  for (const dir of dirs) if (!(await isDir(dir))) missing.push(dir);
  return missing;
}

/** Levenshtein distance, case-insensitive (ids differ in case only by accident). */
export function editDistance(a: string, b: string): number {
  const s = a.toLowerCase();
  const t = b.toLowerCase();
  let previous = Array.from({ length: t.length + 1 }, (_, j) => j);
  for (let i = 1; i <= s.length; i++) {
    const current = [i];
    for (let j = 1; j <= t.length; j++) {
      const cost = s[i - 1] === t[j - 1] ? 0 : 1;
      current.push(Math.min((previous[j] ?? 0) + 1, (current[j - 1] ?? 0) + 1, (previous[j - 1] ?? 0) + cost));
    }
    previous = current;
  }
  return previous[t.length] ?? Math.max(s.length, t.length);
}

/**
 * Candidates close to `name`, nearest first (at most `limit`): within a third of the length in
 * edits (at least 2), compared on the whole id and on the part after the last `/` (users often
 * type only the name, or put a local name under an org).
 */
export function closeNames(name: string, candidates: Iterable<string>, limit = 5): string[] {
  const tailOf = (id: string): string => id.slice(id.lastIndexOf('/') + 1);
  const within = (a: string, b: string): number | null => {
    const distance = editDistance(a, b);
    return distance <= Math.max(2, Math.floor(a.length / 3)) ? distance : null;
  };
  const scored: Array<{ candidate: string; distance: number }> = [];
  for (const candidate of new Set(candidates)) {
    if (candidate.toLowerCase() === name.toLowerCase()) continue;
    const distances = [within(name, candidate), within(tailOf(name), tailOf(candidate))].filter((d): d is number => d !== null);
    if (distances.length > 0) scored.push({ candidate, distance: Math.min(...distances) });
  }
  return scored
    .sort((a, b) => a.distance - b.distance || a.candidate.localeCompare(b.candidate))
    .slice(0, limit)
    .map((entry) => entry.candidate);
}
