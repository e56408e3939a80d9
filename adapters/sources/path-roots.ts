import { sep } from 'node:path';

/**
 * Whether the resolved `path` is `root` itself or lies under it. Both must already be resolved
 * (absolute, no `..`): a plain prefix test would let `/data2` pass for the root `/data`, so the
 * root is compared with its trailing separator.
 */
export function isInsideRoot(root: string, path: string): boolean {
  const base = root.endsWith(sep) ? root : root + sep;
  return path === root || path.startsWith(base);
}
