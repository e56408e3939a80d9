import { readdir, readFile, stat } from 'node:fs/promises';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { cacheFolderName } from './model-ref.js';

/**
 * The Hugging Face hub cache layout, shared with Python's huggingface_hub so models downloaded by
 * either side are reused: `models--org--name/{blobs/<etag>, snapshots/<commit>/<file>, refs/<rev>}`.
 */

const COMMIT = /^[0-9a-f]{40}$/;

export function isCommitHash(revision: string): boolean {
  return COMMIT.test(revision);
}

/**
 * The hub library's default cache folder. The variables that move it (HF_HUB_CACHE, HF_HOME,
 * XDG_CACHE_HOME) are read by the services' settings layer, which passes the folder down.
 */
export const DEFAULT_HUB_CACHE_DIR = join(homedir(), '.cache', 'huggingface', 'hub');

export function repoCacheDir(cacheDir: string, repo: string): string {
  return join(cacheDir, cacheFolderName(repo));
}

export function snapshotDir(cacheDir: string, repo: string, commit: string): string {
  return join(repoCacheDir(cacheDir, repo), 'snapshots', commit);
}

/** Where the cache records the commit a branch or tag points to. */
export function refFile(cacheDir: string, repo: string, revision: string): string {
  return join(repoCacheDir(cacheDir, repo), 'refs', revision);
}

async function isDirectory(path: string): Promise<boolean> {
  try {
    return (await stat(path)).isDirectory();
  } catch {
    return false; // missing or unreadable: either way not a usable folder
  }
}

async function isReadableFile(path: string): Promise<boolean> {
  try {
    return (await stat(path)).isFile(); // follows the snapshot's symlink into blobs/
  } catch {
    return false; // a dangling link (blob deleted) counts as missing
  }
}

/** The commit a revision points to in the cache, or null when it was never fetched. */
export async function cachedCommit(cacheDir: string, repo: string, revision: string): Promise<string | null> {
  if (isCommitHash(revision)) return revision;
  try {
    const commit = (await readFile(refFile(cacheDir, repo, revision), 'utf8')).trim();
    return isCommitHash(commit) ? commit : null;
  } catch {
    return null; // no ref file: this revision was never fetched
  }
}

/**
 * Whether a snapshot folder can be served as is: it must hold at least one ONNX graph whose blob is
 * present. Snapshots are also written by Python (`hf_hub_download` of a single config.json leaves a
 * snapshot with that file alone) and by interrupted downloads; Shoal fetches graphs last, so a
 * present graph means its own download of that snapshot finished.
 */
export async function isUsableSnapshot(dir: string): Promise<boolean> {
  let entries: string[];
  try {
    entries = await readdir(dir, { recursive: true });
  } catch {
    return false; // no snapshot folder
  }
  for (const entry of entries) {
    if (entry.toLowerCase().endsWith('.onnx') && (await isReadableFile(join(dir, entry)))) return true;
  }
  return false;
}

export interface CachedSnapshot {
  dir: string;
  commit: string;
  /** False when the folder exists but holds no ONNX graph (partial download, or Python fetched a few files). */
  usable: boolean;
}

/** The snapshot of `repo@revision` in the cache, usable or not, or null when there is none. */
export async function inspectCachedSnapshot(cacheDir: string, repo: string, revision: string): Promise<CachedSnapshot | null> {
  const commit = await cachedCommit(cacheDir, repo, revision);
  if (commit === null) return null;
  const dir = snapshotDir(cacheDir, repo, commit);
  if (!(await isDirectory(dir))) return null;
  return { dir, commit, usable: await isUsableSnapshot(dir) };
}

/** The snapshot folder of `repo@revision` if the cache holds a usable one. */
export async function findCachedSnapshot(cacheDir: string, repo: string, revision: string): Promise<string | null> {
  const snapshot = await inspectCachedSnapshot(cacheDir, repo, revision);
  return snapshot?.usable === true ? snapshot.dir : null;
}
