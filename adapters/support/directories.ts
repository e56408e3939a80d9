import { mkdir, stat } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';

/**
 * `mkdir -p`, one level at a time. Node's own recursive mkdir never settles (it spins at 100 %
 * CPU) when a parent folder refuses a new entry with ENOENT rather than EACCES or EROFS, as /proc
 * and some FUSE mounts do: on Node 20, `mkdir('/proc/x/y', { recursive: true })` hangs, and with
 * it a `shoal encode` whose SHOAL_CACHE_DIR pointed there. Here the refusal is an error like any
 * other, which the callers already turn into a message or a fallback.
 */
export async function makeDirectory(path: string): Promise<void> {
  const missing: string[] = [];
  let current = resolve(path);
  for (;;) {
    const info = await stat(current).catch((error: unknown) => {
      if (errorCode(error) === 'ENOENT') return null;
      throw error;
    });
    if (info !== null) {
      if (!info.isDirectory()) throw Object.assign(new Error(`ENOTDIR: not a directory, mkdir '${current}'`), { code: 'ENOTDIR', path: current });
      break;
    }
    missing.push(current);
    const parent = dirname(current);
    if (parent === current) break;
    current = parent;
  }
  for (const folder of missing.reverse()) {
    try {
      await mkdir(folder);
    } catch (error) {
      // Created meanwhile by another process or call: fine, if it is a folder.
      if (errorCode(error) === 'EEXIST' && (await stat(folder)).isDirectory()) continue;
      throw error;
    }
  }
}

function errorCode(error: unknown): unknown {
  return typeof error === 'object' && error !== null && 'code' in error ? error.code : undefined;
}
