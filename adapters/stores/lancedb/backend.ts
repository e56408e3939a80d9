import { resolve } from 'node:path';
import { LazyStore } from '../shared/lazy.js';
import { checkLanceDbTableName } from '../shared/table-names.js';
import { invalidIndex, trailingQuery } from '../shared/uri-parts.js';
import { redactUri } from '../../protocol/uri-credentials.js';
import type { IndexRef, StoreBackend } from '../store-backend.js';

/** LanceDB, embedded: a folder on this machine, the default store (`./shoal-index`). */
export const lancedbBackend = {
  name: 'lancedb',
  schemes: ['lancedb'],
  bareFolder: true,
  forms: ['a folder', 'lancedb://DIR[?table=T]'],
  summary: 'LanceDB in a local folder (embedded, the default): IVF-PQ past 20k rows, BM25 full-text index',
  capabilities: { search: 'ann', fullText: true, metadataFilters: true, sizes: true, embedded: true },
  settings: {},
  parse(uri, context): IndexRef {
    let dir = uri;
    let table = context.fallbackTable;
    if (uri.toLowerCase().startsWith('lancedb://')) {
      const { base, params } = trailingQuery(uri.slice('lancedb://'.length), ['table'], 'lancedb://DIR[?table=T]');
      if (base === '') throw invalidIndex('lancedb://DIR needs a folder');
      dir = decodeURIComponent(base);
      table = params.table ?? table;
    }
    // LanceDB's own table rule (up to 128 characters), checked now so a bad name is refused at once.
    checkLanceDbTableName(table);
    return {
      backend: 'lancedb',
      display: redactUri(uri),
      table,
      localDir: resolve(dir),
      // LanceDB with apache-arrow is the heaviest import of all: on first use.
      open: () => new LazyStore(async () => new (await import('./store.js')).LanceDbStore({ dir, table })),
      openAdmin: async () => new (await import('./admin.js')).LanceDbAdmin({ dir }),
    };
  },
} as const satisfies StoreBackend;
