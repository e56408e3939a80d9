import { fileURLToPath } from 'node:url';
import { LazyStore } from '../shared/lazy.js';
import { checkTableName } from '../shared/table-names.js';
import { invalidIndex, parsePart, parseUrl, queryParts, tableNamePart } from '../shared/uri-parts.js';
import { redactUri } from '../../protocol/uri-credentials.js';
import type { IndexRef, StoreBackend } from '../store-backend.js';

/** JSON Lines files in a local folder: exact search, no server, readable with any tool. */
export const fileBackend = {
  name: 'file',
  schemes: ['file'],
  forms: ['file:///dir'],
  summary: 'JSON Lines files in a local folder: exact search over every row, readable with any tool',
  capabilities: { search: 'exact', fullText: false, metadataFilters: true, sizes: true, embedded: true },
  settings: {},
  parse(uri, context): IndexRef {
    const parsed = parseUrl(uri);
    const params = queryParts(parsed, ['table'], 'file:///dir');
    if (parsed.host !== '') throw invalidIndex('file:///dir takes an absolute path (three slashes)');
    const table = parsePart(tableNamePart(), params.table ?? context.fallbackTable, 'file:// table');
    parsed.search = '';
    const dir = fileURLToPath(parsed);
    checkTableName(table);
    return {
      backend: 'file',
      display: redactUri(uri),
      table,
      localDir: dir,
      open: () => new LazyStore(async () => new (await import('./store.js')).JsonlStore({ dir, table })),
      openAdmin: async () => new (await import('./admin.js')).JsonlAdmin({ dir }),
    };
  },
} as const satisfies StoreBackend;
