import type { Store } from '../../../adapters/stores/store.js';
import { pruneRemoved, type PruneRoot, type SelectionGlobs } from '../../../pipelines/documents/prune.js';
import type { IngestSummary } from '../../../pipelines/documents/runner.js';
import type { PendingSource } from '../../../pipelines/documents/sources.js';
import type { CliApp } from '../app.js';
import { printable } from '../printable.js';

export { pruneRoots } from '../../../pipelines/documents/prune.js';

/**
 * `shoal ingest --prune`, after the run (in process or `--nats`, through the same sink): deletes
 * the documents of the given folders and s3:// prefixes that are no longer there
 * (pipelines/documents/prune.ts) and returns the summary with `removed` set. Why a root was left
 * alone goes to stderr, as a warning (not silenced by --quiet: the user asked for a prune).
 */

export interface PruneCall {
  app: CliApp;
  sink: Store;
  roots: readonly PruneRoot[];
  sources: readonly PendingSource[];
  summary: IngestSummary;
  globs: SelectionGlobs;
}

export async function pruneAfterRun(call: PruneCall): Promise<IngestSummary> {
  const { app, roots, summary } = call;
  if (roots.length === 0) {
    app.io.stderr.write('warning: --prune: no folder or s3:// prefix was given (files and stdin records are never pruned); nothing removed\n');
    return { ...summary, removed: 0 };
  }
  const outcome = await pruneRemoved(call.sink, roots, { seen: call.sources.map((source) => source.uri), failed: summary.failed, globs: call.globs });
  for (const skipped of outcome.skipped) app.io.stderr.write(`warning: --prune left ${printable(skipped.root)} alone: ${printable(skipped.reason)}\n`);
  return { ...summary, removed: outcome.removed.length };
}
