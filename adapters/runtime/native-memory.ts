import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * Giving freed native memory back to the OS after a model is unloaded (glibc's malloc_trim,
 * through the small addon in native/, built by `npm run build`). Without it, what onnxruntime
 * frees on release stays in the allocator's arenas and the worker's RSS never falls; the other
 * remedy, MALLOC_TRIM_THRESHOLD_=0, costs about 20 % of inference throughput (every large
 * allocation becomes a fresh mmap), so bin/shoal.js falls back to it only when the addon is
 * missing (or turned off with SHOAL_NATIVE_TRIM=0). Where the addon cannot be built (no C
 * compiler) or the C library is not glibc, this does nothing.
 */

const ADDON = join('native', 'build', 'malloc-trim.node');

/** The addon's malloc_trim; null when absent or unsupported, undefined until looked up. */
let trim: (() => boolean) | null | undefined;

/** The package root: the nearest folder above this file with a package.json (sources or dist/). */
function packageRoot(): string | null {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    if (existsSync(join(dir, 'package.json')) && existsSync(join(dir, 'native'))) return dir;
    const parent = dirname(dir);
    if (parent === dir) return null;
    dir = parent;
  }
}

/** The built addon's path, or null when it has not been built. */
export function trimAddonPath(): string | null {
  const root = packageRoot();
  if (root === null) return null;
  const file = join(root, ADDON);
  return existsSync(file) ? file : null;
}

function load(): (() => boolean) | null {
  if (trim !== undefined) return trim;
  trim = null;
  const file = trimAddonPath();
  if (file === null) return trim;
  try {
    const loaded: unknown = createRequire(import.meta.url)(file);
    if (loaded === null || typeof loaded !== 'object' || !('mallocTrim' in loaded) || !('supported' in loaded)) return trim;
    const { mallocTrim, supported } = loaded;
    if (typeof mallocTrim !== 'function' || typeof supported !== 'function' || supported() !== true) return trim;
    trim = () => mallocTrim() === true;
  } catch {
    // A stale build for another Node ABI or platform: treated as absent.
    trim = null;
  }
  return trim;
}

/** Whether freed memory can be handed back on demand in this process. */
export function canReturnFreedMemory(): boolean {
  return load() !== null;
}

/** Hands memory the allocator holds but no one uses back to the OS; true when some was. */
export function returnFreedMemory(): boolean {
  return load()?.() ?? false;
}
