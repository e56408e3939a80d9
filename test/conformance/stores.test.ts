import { afterAll, beforeAll, describe, expect } from 'vitest';
import { parseIndexRef, STORES } from '../../adapters/stores/registry.js';
import type { Store } from '../../adapters/stores/store.js';
import { storeContract } from './stores/contract.js';
import { STORE_HARNESSES } from './stores/harnesses.js';

/**
 * The shared Store contract (stores/contract.ts) against every backend the registry lists, each
 * opened as `shoal` opens an `--index` URI: the harness's URI for a table, parsed by the registry,
 * then `IndexRef.open()`. Each backend's server or folder lives for its own block only, so one
 * server runs at a time. Backend-specific behaviour stays in test/unit/adapters/stores/<backend>/.
 */

for (const backend of STORES) {
  const harness = STORE_HARNESSES[backend.name]();
  describe(backend.name, () => {
    beforeAll(() => harness.start(), 60_000);
    afterAll(() => harness.stop());

    const open = (table: string): Store => {
      const ref = parseIndexRef(harness.uri(table), harness.parseOptions?.() ?? {});
      // The URI must reach the backend under test, with the table asked for (not a fallback).
      expect([ref.backend, ref.table]).toEqual([backend.name, table]);
      return ref.open();
    };
    storeContract(`${backend.name} (${harness.serves})`, open, harness.contract);
  });
}
