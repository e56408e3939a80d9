import { readFile, stat } from 'node:fs/promises';
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

/** HF_HUB_CACHE, else HF_HOME/hub, else ~/.cache/huggingface/hub (the hub library's own order). */
export function defaultHubCacheDir(env: NodeJS.ProcessEnv = process.env): string {
  if (env.HF_HUB_CACHE !== undefined && env.HF_HUB_CACHE !== '') return env.HF_HUB_CACHE;
  if (env.HF_HOME !== undefined && env.HF_HOME !== '') return join(env.HF_HOME, 'hub');
  const xdg = env.XDG_CACHE_HOME !== undefined && env.XDG_CACHE_HOME !== '' ? env.XDG_CACHE_HOME : join(homedir(), '.cache');
  return join(xdg, 'huggingface', 'hub');
}

export function repoCacheDir(cacheDir: string, repo: string): string {
  return join(cacheDir, cacheFolderName(repo));
}

async function isDirectory(path: string): Promise<boolean> {
  try {
    return (await stat(path)).isDirectory();
  } catch {
    return false;
  }
}

/** The commit a revision points to in the cache, or null when it was never fetched. */
export async function cachedCommit(cacheDir: string, repo: string, revision: string): Promise<string | null> {
  if (isCommitHash(revision)) return revision;
  try {
    const commit = (await readFile(join(repoCacheDir(cacheDir, repo), 'refs', revision), 'utf8')).trim();
    return isCommitHash(commit) ? commit : null;
  } catch {
    return null;
  }
}

/** The snapshot folder of `repo@revision` if it is in the cache. */
export async function findCachedSnapshot(cacheDir: string, repo: string, revision: string): Promise<string | null> {
  const commit = await cachedCommit(cacheDir, repo, revision);
  if (commit === null) return null;
  const dir = join(repoCacheDir(cacheDir, repo), 'snapshots', commit);
  return (await isDirectory(dir)) ? dir : null;
}
