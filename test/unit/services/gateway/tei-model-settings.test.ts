import { describe, expect, it } from 'vitest';
import { resolveGatewayConfig } from '../../../../services/gateway/config.js';

/** The models behind the TEI routes: flags win over the environment; an empty variable is unset. */
describe('gateway TEI model settings', () => {
  it('reads SHOAL_EMBED_MODEL, SHOAL_RERANK_MODEL and SHOAL_SPARSE_MODEL', () => {
    const set = resolveGatewayConfig({}, { SHOAL_EMBED_MODEL: 'org/dense', SHOAL_RERANK_MODEL: 'org/cross', SHOAL_SPARSE_MODEL: 'naver/splade-v3' });
    expect([set.embedModel, set.rerankModel, set.sparseModel]).toEqual(['org/dense', 'org/cross', 'naver/splade-v3']);
  });

  it('lets --sparse-model win over the environment, and leaves it null when unset or empty (docker-compose passes "")', () => {
    expect(resolveGatewayConfig({ sparseModel: 'org/flag' }, { SHOAL_SPARSE_MODEL: 'org/env' }).sparseModel).toBe('org/flag');
    expect(resolveGatewayConfig({}, {}).sparseModel).toBeNull();
    expect(resolveGatewayConfig({}, { SHOAL_SPARSE_MODEL: '' }).sparseModel).toBeNull();
  });
});
