import type { StoreWriteObserver } from '../../adapters/stores/shared/delivery.js';
import { INDEX_FORMS } from '../../adapters/stores/registry.js';
import { openStore, parseIndexRef, type IndexRef, type OpenedStore } from '../../adapters/stores/open.js';
import type { CliApp } from './app.js';

/**
 * `--index URI` (and `--table`) of `shoal ingest` / `shoal search` / `shoal index`: parsed once
 * into an IndexRef (a bad URI refused before any work), with credentials from the environment or
 * the settings file, then opened with retries that an interrupt ends (`observer`: told of
 * failures and recoveries, `shoal ingest`'s degraded mark). A URI that names its own table or
 * collection wins over `--table`.
 */
export function parseIndex(app: CliApp, index: string, table: string): IndexRef {
  return parseIndexRef(index, { table, credentials: app.settings.stores, s3: app.settings.s3 });
}

export function openIndexRef(app: CliApp, ref: IndexRef, observer?: StoreWriteObserver): OpenedStore {
  return openStore(ref, { retry: { signal: app.io.signal }, ...(observer === undefined ? {} : { observer }) });
}

/** Parse and open, for the commands that need nothing from the IndexRef before opening. */
export function openIndex(app: CliApp, index: string, table: string, observer?: StoreWriteObserver): OpenedStore {
  return openIndexRef(app, parseIndex(app, index, table), observer);
}

/** `--index` help, shared by the commands, from the stores registry. */
export const INDEX_HELP = `where the index lives: ${INDEX_FORMS.replace(/, ([^,]*)$/, ' or $1')} (docs/storage.md)`;
