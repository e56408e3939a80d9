import { redactUri } from '../../protocol/uri-credentials.js';
import { LazyStore } from '../shared/lazy.js';
import { STORE_TIMEOUT_SETTING } from '../shared/remote-settings.js';
import { parseServerUri } from '../shared/server-uri.js';
import { checkTableName } from '../shared/table-names.js';
import type { IndexRef, StoreBackend } from '../store-backend.js';
import type { ChromaStoreOptions } from './store.js';

/** A Chroma server's collection, over its HTTP API. */
export const chromaBackend = {
  name: 'chroma',
  schemes: ['chroma'],
  forms: ['chroma://host:port/COLLECTION'],
  summary: 'a Chroma server (HTTP API v2): its HNSW index, `where` filters; no full-text ranking',
  capabilities: { search: 'ann', fullText: false, metadataFilters: true, sizes: false, embedded: false },
  settings: {
    chromaApiKey: { env: ['CHROMA_API_KEY'], meaning: 'token for a `chroma://` index, sent as `x-chroma-token` (never logged)', default: null, shown: 'none' },
    chromaTenant: { env: ['CHROMA_TENANT'], meaning: 'Chroma tenant of a `chroma://` index', default: null, shown: 'the server\'s default' },
    chromaDatabase: { env: ['CHROMA_DATABASE'], meaning: 'Chroma database of a `chroma://` index', default: null, shown: 'the server\'s default' },
    storeTimeoutMs: STORE_TIMEOUT_SETTING,
  },
  parse(uri, context): IndexRef {
    const parts = parseServerUri(uri, 'chroma', { defaultPort: 8000, params: ['ssl', 'tenant', 'database'], keyVariable: 'CHROMA_API_KEY', fallbackTable: context.fallbackTable });
    const { credentials } = context;
    const apiKey = credentials.chromaApiKey;
    const options: ChromaStoreOptions = {
      host: parts.host, port: parts.port, ssl: parts.ssl ?? false, collection: checkTableName(parts.collection),
      ...(context.batchRows === undefined ? {} : { batchRows: context.batchRows }),
      ...(credentials.storeTimeoutMs === undefined ? {} : { requestTimeoutMs: credentials.storeTimeoutMs }),
      tenant: parts.tenant ?? credentials.chromaTenant, database: parts.database ?? credentials.chromaDatabase,
      ...(apiKey === undefined ? {} : { headers: { 'x-chroma-token': apiKey } }),
    };
    return {
      backend: 'chroma',
      display: redactUri(uri),
      table: parts.collection,
      localDir: null,
      open: () => new LazyStore(async () => new (await import('./store.js')).ChromaStore(options)),
      openAdmin: async () => new (await import('./admin.js')).ChromaAdmin(options),
    };
  },
} as const satisfies StoreBackend;
