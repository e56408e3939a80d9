import type { HnswBuild } from './sql.js';

/**
 * The HNSW build parameters when the index URI sets none (`hnsw_m`, `hnsw_ef_construction`):
 * pgvector's own defaults. Apart from store.ts so that the backend's URI parsing (loaded for every
 * `--index`) checks them without importing the store and its driver.
 */
export const DEFAULT_HNSW_BUILD: Readonly<HnswBuild> = Object.freeze({ m: 16, efConstruction: 64 });
