import { homedir } from 'node:os';
import { join } from 'node:path';

/** Shoal's own cache folder: $SHOAL_CACHE_DIR, default ~/.cache/shoal (quantized graphs, tuning results). */
export function shoalCacheDir(env: NodeJS.ProcessEnv = process.env): string {
  const configured = env.SHOAL_CACHE_DIR;
  return configured !== undefined && configured.trim() !== '' ? configured : join(homedir(), '.cache', 'shoal');
}
