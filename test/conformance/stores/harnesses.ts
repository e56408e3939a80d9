import type { StoreName } from '../../../adapters/stores/registry.js';
import { chromaHarness } from './harness-chroma.js';
import { fileHarness } from './harness-file.js';
import type { StoreHarness } from './harness.js';
import { lancedbHarness } from './harness-lancedb.js';
import { pgvectorHarness } from './harness-pgvector.js';
import { qdrantHarness } from './harness-qdrant.js';
import { s3Harness } from './harness-s3.js';

/**
 * One harness per registered backend. Keyed by StoreName, so a backend added to
 * adapters/stores/registry.ts without a harness here fails the typecheck: no backend is left out
 * of the contract suite. A factory, so each use has its own server or folder.
 */
export const STORE_HARNESSES: Readonly<Record<StoreName, () => StoreHarness>> = {
  lancedb: lancedbHarness,
  pgvector: pgvectorHarness,
  chroma: chromaHarness,
  qdrant: qdrantHarness,
  file: fileHarness,
  s3: s3Harness,
};
