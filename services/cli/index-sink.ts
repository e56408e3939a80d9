import type { SinkWriteObserver } from '../../adapters/sinks/delivery.js';
import { openSink, type OpenedSink } from '../../adapters/sinks/open.js';
import { s3SettingsFromEnv, sinkCredentialsFromEnv } from '../settings/environment.js';
import type { CliApp } from './app.js';

/**
 * `--index URI` (and `--table`) of `shoal ingest` / `shoal search` → the sink, with credentials
 * from the environment or the settings file and retries that an interrupt ends (`observer`: told
 * of failures and recoveries, `shoal ingest`'s degraded mark). A URI that names
 * its own table or collection wins over `--table`.
 */
export function openIndex(app: CliApp, index: string, table: string, observer?: SinkWriteObserver): OpenedSink {
  return openSink(index, {
    table,
    credentials: sinkCredentialsFromEnv(app.io.env),
    s3: s3SettingsFromEnv(app.io.env),
    retry: { signal: app.io.signal },
    ...(observer === undefined ? {} : { observer }),
  });
}

/** `--index` help, shared by both commands. */
export const INDEX_HELP = 'where the index lives: a folder (LanceDB), lancedb://DIR, postgres://user@host:port/db, chroma://host:port/COLLECTION, qdrant://host:port/COLLECTION, file:///dir or s3://bucket/prefix (docs/storage.md)';
