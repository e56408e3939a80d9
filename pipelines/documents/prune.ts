import { stat } from 'node:fs/promises';
import { resolve, sep } from 'node:path';
import picomatch from 'picomatch';
import { folderPrefix, parseS3Uri } from '../../adapters/object-store/index.js';
import type { Store } from '../../adapters/stores/store.js';
import type { FailedDocument } from './runner.js';

/**
 * `shoal ingest --prune`: documents ingested before from under a folder (or an `s3://` prefix)
 * given to this run, and no longer found there, are deleted from the index (rows and state).
 *
 * Only sources strictly under a root are candidates: a root is a folder or prefix named on the
 * command line, never a single file and never stdin records, so `shoal ingest one.pdf --prune`
 * deletes nothing. A candidate must also pass the run's --include/--exclude globs (matched as
 * the walk matches them, against the path relative to the root): `--include '*.md'` never prunes
 * the PDFs of the same folder. A root is left alone when a document under it failed in this run
 * (a failed read must not delete rows) or when nothing at all was found under it (an unmounted
 * volume or an emptied bucket prefix looks the same as a deleted corpus; delete those rows by
 * hand, e.g. with a new index).
 */

export interface SelectionGlobs {
  include?: readonly string[];
  exclude?: readonly string[];
}

export interface PruneRoot {
  /** The folder or prefix as the user wrote it (for messages). */
  given: string;
  /** Source URIs under the root start with this: the absolute folder path and a separator, or `s3://bucket/prefix/`. */
  prefix: string;
}

export interface SkippedRoot {
  root: string;
  reason: string;
}

export interface PruneOutcome {
  /** Sources whose rows and state were deleted, sorted. */
  removed: string[];
  /** Roots left alone, with why. */
  skipped: SkippedRoot[];
}

/** The folders and `s3://` prefixes among the paths of a run; files and `-` (stdin) give none. */
export async function pruneRoots(paths: readonly string[]): Promise<PruneRoot[]> {
  const roots: PruneRoot[] = [];
  for (const given of paths) {
    if (given === '-') continue;
    if (given.startsWith('s3://')) {
      const { bucket, key } = parseS3Uri(given);
      roots.push({ given, prefix: `s3://${bucket}/${folderPrefix(key)}` });
      continue;
    }
    const path = resolve(given);
    if (!(await stat(path)).isDirectory()) continue;
    roots.push({ given, prefix: path.endsWith(sep) ? path : `${path}${sep}` });
  }
  return roots;
}

function selector(globs: SelectionGlobs): (relative: string) => boolean {
  const include = globs.include !== undefined && globs.include.length > 0 ? picomatch([...globs.include], { dot: true }) : null;
  const exclude = globs.exclude !== undefined && globs.exclude.length > 0 ? picomatch([...globs.exclude], { dot: true }) : null;
  return (relative) => (include === null || include(relative)) && (exclude === null || !exclude(relative));
}

export interface PruneRun {
  /** Every source of the run (committed, unchanged or failed): these are present, never pruned. */
  seen: readonly string[];
  failed: readonly FailedDocument[];
  globs?: SelectionGlobs;
}

/** Deletes the sources under `roots` that the index holds and the run did not see (see the file comment). */
export async function pruneRemoved(sink: Store, roots: readonly PruneRoot[], run: PruneRun): Promise<PruneOutcome> {
  const seen = new Set(run.seen);
  const selected = selector(run.globs ?? {});
  const removed = new Set<string>();
  const skipped: SkippedRoot[] = [];
  for (const root of roots) {
    const under = (source: string): boolean => source.startsWith(root.prefix);
    const failed = run.failed.filter((failure) => under(failure.source)).length;
    if (failed > 0) {
      skipped.push({ root: root.given, reason: `${failed} document(s) under it failed in this run` });
      continue;
    }
    if (!run.seen.some(under)) {
      skipped.push({ root: root.given, reason: 'no document was found under it in this run' });
      continue;
    }
    for (const state of await sink.statesUnder(root.prefix)) {
      const relative = state.source.slice(root.prefix.length).split(sep).join('/');
      if (!seen.has(state.source) && selected(relative)) removed.add(state.source);
    }
  }
  const sources = [...removed].sort();
  await sink.remove(sources);
  return { removed: sources, skipped };
}
