import { describe, expect, it } from 'vitest';
import { resolveGatewayConfig } from '../../../../services/gateway/config.js';

/** The classification settings of the gateway: sync limit and results folder from the environment, defaults under the cache. */
describe('gateway classify settings', () => {
  it('reads SHOAL_CLASSIFY_SYNC_ITEMS and SHOAL_CLASSIFY_RESULTS_DIR, and defaults the results under SHOAL_CACHE_DIR', () => {
    const set = resolveGatewayConfig({}, { SHOAL_CLASSIFY_SYNC_ITEMS: '16', SHOAL_CLASSIFY_RESULTS_DIR: '/srv/results', SHOAL_CACHE_DIR: '/var/cache/shoal' });
    expect(set.classify).toEqual({ syncItems: 16, resultsDir: '/srv/results', cacheDir: '/var/cache/shoal' });
    const defaults = resolveGatewayConfig({}, { SHOAL_CACHE_DIR: '/var/cache/shoal' });
    expect(defaults.classify).toEqual({ syncItems: 256, resultsDir: '/var/cache/shoal/classify-jobs', cacheDir: '/var/cache/shoal' });
  });

  it('refuses a sync limit that is not a whole number, naming the variable', () => {
    expect(() => resolveGatewayConfig({}, { SHOAL_CLASSIFY_SYNC_ITEMS: 'many' })).toThrow(/SHOAL_CLASSIFY_SYNC_ITEMS/);
    expect(() => resolveGatewayConfig({}, { SHOAL_CLASSIFY_SYNC_ITEMS: '100001' })).toThrow(/SHOAL_CLASSIFY_SYNC_ITEMS/);
  });
});
