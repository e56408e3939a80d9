import type { SinkWriteObserver } from '../../adapters/sinks/delivery.js';
import type { OpenedSink } from '../../adapters/sinks/open.js';
import { openIndex as openIndexWith } from '../library/documents.js';
import type { CliApp } from './app.js';

/**
 * `--index URI` (and `--table`) of `shoal ingest` / `shoal search` → the sink, with credentials
 * from the environment or the settings file and retries that an interrupt ends (`observer`: told
 * of failures and recoveries, `shoal ingest`'s degraded mark). A URI that names
 * its own table or collection wins over `--table`. The library's openIndex, with the CLI's
 * environment and interrupt signal.
 */
export function openIndex(app: CliApp, index: string, table: string, observer?: SinkWriteObserver): OpenedSink {
  return openIndexWith(index, { table, env: app.io.env, signal: app.io.signal, observer });
}

/** `--index` help, shared by both commands. */
export const INDEX_HELP = 'where the index lives: a folder (LanceDB), lancedb://DIR, postgres://user@host:port/db, chroma://host:port/COLLECTION, qdrant://host:port/COLLECTION, file:///dir or s3://bucket/prefix (docs/storage.md)';
