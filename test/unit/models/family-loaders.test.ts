import { describe, expect, it } from 'vitest';
import { loadFamily } from '../../../adapters/models/family-loaders.js';
import { Family } from '../../../adapters/models/profile.js';
import { getFamily } from '../../../adapters/models/registry.js';

/** Model threads import only their family's adapter; it must be the one the registry names. */
describe('family loaders', () => {
  it('load, for every family, the same adapter the registry holds', async () => {
    for (const name of Family.options) {
      const adapter = await loadFamily(name);
      expect(adapter.name).toBe(name);
      expect(adapter).toBe(getFamily(name));
    }
  });
});
