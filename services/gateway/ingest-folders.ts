import { realpath, stat } from 'node:fs/promises';
import { resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { ErrorCode, ShoalError } from '../../adapters/protocol/errors.js';
import type { PruneRoot } from '../../pipelines/documents/prune.js';
import { fileSources } from '../../pipelines/documents/sources.js';
import type { IngestRecord } from './context.js';
import { isInsideRoot } from '../../adapters/sources/path-roots.js';

/**
 * `file://` folder references of POST /v1/ingest: a reference to a folder inside the gateway's
 * file roots stands for every file under it (walked as `shoal ingest DIR` walks: recursive,
 * sorted, links not followed), each named `file:///abs/path` like a single-file reference, so
 * the same file is the same source either way. The folders are the run's prune roots (as the
 * folders on the `shoal ingest --prune` command line); files, inline records and `obj://` or
 * `s3://` references are never roots. A folder outside the roots is refused before it is read,
 * so a request cannot list the gateway's filesystem.
 */

export interface ExpandedSources {
  records: IngestRecord[];
  /** The folders given, as prune roots (prefix `file:///abs/folder/`). */
  roots: PruneRoot[];
}

function outsideRoots(path: string, roots: readonly string[]): ShoalError {
  return new ShoalError(
    ErrorCode.INVALID_INPUT,
    roots.length === 0
      ? `file references are turned off on this gateway (${path}); configure file roots (SHOAL_FILE_ROOTS) or use obj://`
      : `${path} is outside the allowed file roots (${roots.join(', ')})`,
  );
}

/** The folder a `file://` reference names when it is one inside the roots; null for anything else (read as one document later). */
async function folderOf(ref: string, roots: readonly string[]): Promise<string | null> {
  if (!ref.startsWith('file://')) return null;
  let path: string;
  try {
    path = resolve(fileURLToPath(ref));
  } catch {
    return null; // Refused with its own message when it is read.
  }
  // Outside the roots as written: never stat'ed here (no probing of other folders); the read refuses it.
  if (!roots.some((root) => isInsideRoot(root, path))) return null;
  const info = await stat(path).catch(() => null);
  if (info === null || !info.isDirectory()) return null;
  // A link inside a root may point out of it: the resolved folder must be inside a resolved root too.
  const real = await realpath(path);
  const realRoots = await Promise.all(roots.map(async (root) => realpath(root).catch(() => root)));
  if (!realRoots.some((root) => isInsideRoot(root, real))) throw outsideRoots(path, roots);
  return path;
}

/** Replaces folder references by their files (at most `limit` sources in all, duplicates dropped) and lists the folders. */
export async function expandFolders(records: readonly IngestRecord[], fileRoots: readonly string[], limit: number): Promise<ExpandedSources> {
  const roots = fileRoots.map((root) => resolve(root));
  const out: IngestRecord[] = [];
  const folders: PruneRoot[] = [];
  const seen = new Set<string>();
  const add = (record: IngestRecord): void => {
    const name = record.id ?? ('ref' in record ? record.ref : '');
    if (seen.has(name)) return;
    seen.add(name);
    out.push(record);
    if (out.length > limit) throw new ShoalError(ErrorCode.INVALID_INPUT, `more than ${limit} documents in one ingest request (folders included); split it`);
  };
  for (const record of records) {
    const folder = 'ref' in record ? await folderOf(record.ref, roots) : null;
    if (folder === null || !('ref' in record)) {
      add(record);
      continue;
    }
    if (record.id !== undefined) throw new ShoalError(ErrorCode.INVALID_INPUT, `a folder reference takes no id (its files are named by their file:// URIs): ${record.id.slice(0, 200)}`);
    const prefix = pathToFileURL(folder).href;
    folders.push({ given: record.ref, prefix: prefix.endsWith('/') ? prefix : `${prefix}/` });
    // The folder's metadata, if any, goes with each of its files.
    for (const file of await fileSources([folder])) add({ ref: pathToFileURL(file.uri).href, ...(record.metadata === undefined ? {} : { metadata: record.metadata }) });
  }
  return { records: out, roots: folders };
}
