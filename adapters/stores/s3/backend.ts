import { parseS3Uri } from '../../object-store/uri.js';
import { LazyStore } from '../shared/lazy.js';
import { parsePart, tableNamePart, trailingQuery } from '../shared/uri-parts.js';
import { redactUri } from '../../protocol/uri-credentials.js';
import type { IndexRef, StoreBackend } from '../store-backend.js';

/** JSON objects under an S3 prefix (any S3-compatible server): exact search, no database. */
export const s3Backend = {
  name: 's3',
  schemes: ['s3'],
  forms: ['s3://bucket/prefix'],
  summary: 'JSON objects under an S3 prefix (AWS or any S3-compatible server; the S3 client settings of [S3](#s3)): exact search over every row',
  capabilities: { search: 'exact', fullText: false, metadataFilters: true, sizes: true, embedded: false },
  // The S3 client's settings (endpoint, region, keys) are the object store's, shared with jobs and sources.
  settings: {},
  parse(uri, context): IndexRef {
    // `?table=` wins over --table.
    const { base, params } = trailingQuery(uri, ['table'], 's3://bucket/prefix[?table=T]');
    const table = parsePart(tableNamePart(), params.table ?? context.fallbackTable, 's3 table');
    // The bucket and prefix checked now, so a bad one is refused before anything runs.
    parseS3Uri(base);
    const s3 = context.s3;
    return {
      backend: 's3',
      display: redactUri(uri),
      table,
      localDir: null,
      open: () => new LazyStore(async () => new (await import('./store.js')).S3JsonStore({ uri: base, table, s3 })),
      openAdmin: async () => new (await import('./admin.js')).S3Admin({ uri: base, s3 }),
    };
  },
} as const satisfies StoreBackend;
