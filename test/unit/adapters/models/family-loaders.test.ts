import { describe, expect, it } from 'vitest';
import { loadFamily } from '../../../../adapters/models/family-loaders.js';
import { Family } from '../../../../adapters/models/profile.js';
import { allFamilies, FAMILIES, getFamily } from '../../../../adapters/models/registry.js';

/**
 * The registry is the one list of families: profile.ts's enum is its keys, detection runs its
 * specs, and model threads import only their family's adapter through its loader.
 */
describe('family registry and loaders', () => {
  it('the Family enum is the registry table, in detection order', () => {
    expect(Family.options).toEqual(Object.keys(FAMILIES));
    expect(allFamilies().map((family) => family.name)).toEqual(Family.options);
    expect(Family.options).toEqual([
      'dense',
      'cross-encoder',
      'causal-reranker',
      'splade',
      'colbert',
      'gliner',
      'token-classification',
      'ocr',
      'clip',
      'image-classification',
    ]);
  });

  it('load, for every family, an adapter named after its key that carries the registry spec', async () => {
    for (const name of Family.options) {
      const adapter = await loadFamily(name);
      expect(adapter.name).toBe(name);
      expect(adapter.capabilities).toBe(getFamily(name).capabilities);
      expect(adapter.match).toBe(getFamily(name).match);
      expect(adapter).toBe(await loadFamily(name));
    }
  });
});
