import type { StoreSettingSpec } from '../store-backend.js';

/** The request timeout the server stores (Chroma, Qdrant, pgvector) read: one declaration, listed by each. */
export const STORE_TIMEOUT_SETTING: StoreSettingSpec = {
  env: ['SHOAL_STORE_TIMEOUT_MS'],
  meaning: 'longest wait for one request to a `chroma://` or `qdrant://` index, or for the answer to one statement to a `postgres://` index (index builds excepted; its URI\'s `query_timeout=` wins), in ms: a store that accepts connections and never answers fails (TIMEOUT, UNAVAILABLE for PostgreSQL; retried as an outage)',
  default: 60000,
};
