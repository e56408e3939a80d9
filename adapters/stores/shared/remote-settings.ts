import type { StoreSettingSpec } from '../store-backend.js';

/** The request timeout both HTTP stores (Chroma, Qdrant) read: one declaration, listed by each. */
export const STORE_TIMEOUT_SETTING: StoreSettingSpec = {
  env: ['SHOAL_STORE_TIMEOUT_MS'],
  meaning: 'longest wait for one request to a `chroma://` or `qdrant://` index, in ms: a store that accepts connections and never answers fails as TIMEOUT (retried as an outage)',
  default: 60000,
};
