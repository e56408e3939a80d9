import { redactUri } from '../../protocol/uri-credentials.js';
import { LazyStore } from '../shared/lazy.js';
import { STORE_TIMEOUT_SETTING } from '../shared/remote-settings.js';
import { parseServerUri } from '../shared/server-uri.js';
import { checkTableName } from '../shared/table-names.js';
import type { IndexRef, StoreBackend } from '../store-backend.js';

/** A Qdrant server's collection, over its REST API. */
export const qdrantBackend = {
  name: 'qdrant',
  schemes: ['qdrant'],
  forms: ['qdrant://host:port/COLLECTION'],
  summary: 'a Qdrant server (REST API): its HNSW index, payload filters, sparse vectors; no full-text ranking',
  capabilities: { search: 'ann', fullText: false, metadataFilters: true, sizes: false, embedded: false },
  settings: {
    qdrantApiKey: { env: ['QDRANT_API_KEY'], meaning: 'API key for a `qdrant://` index (never logged)', default: null, shown: 'none' },
    storeTimeoutMs: STORE_TIMEOUT_SETTING,
  },
  parse(uri, context): IndexRef {
    const parts = parseServerUri(uri, 'qdrant', { defaultPort: 6333, params: ['ssl'], keyVariable: 'QDRANT_API_KEY', fallbackTable: context.fallbackTable });
    const { credentials } = context;
    const options = {
      host: parts.host, port: parts.port, https: parts.ssl ?? false, apiKey: credentials.qdrantApiKey, collection: checkTableName(parts.collection),
      ...(context.batchRows === undefined ? {} : { batchRows: context.batchRows }),
      ...(credentials.storeTimeoutMs === undefined ? {} : { requestTimeoutMs: credentials.storeTimeoutMs }),
    };
    return {
      backend: 'qdrant',
      display: redactUri(uri),
      table: parts.collection,
      localDir: null,
      open: () => new LazyStore(async () => new (await import('./store.js')).QdrantStore(options)),
      openAdmin: async () => new (await import('./admin.js')).QdrantAdmin(options),
    };
  },
} as const satisfies StoreBackend;
