import { describe, expect, it } from 'vitest';
import { ErrorCode } from '../../../../adapters/protocol/errors.js';
import { indexTarget } from '../../../../services/gateway/index-stores.js';
import { namedIndexesFromEnv } from '../../../../services/settings/environment.js';

const parseIndexes = (value: string | undefined): Record<string, string> | undefined => namedIndexesFromEnv(value === undefined ? {} : { SHOAL_INDEXES: value });
import { resolveGatewayConfig } from '../../../../services/gateway/config.js';

describe('gateway indexes (SHOAL_INDEXES)', () => {
  it('maps names to targets, and only configured names resolve', () => {
    const indexes = parseIndexes(' docs=/srv/index , legal=/srv/legal-index ');
    expect(indexes).toEqual({ docs: '/srv/index', legal: '/srv/legal-index' });
    expect(indexTarget(indexes, 'docs')).toBe('/srv/index');
    for (const name of ['other', '../srv/index', '/srv/index', 'constructor', '__proto__', 'toString']) {
      expect(() => indexTarget(indexes, name), name).toThrow(expect.objectContaining({ code: ErrorCode.NOT_FOUND }));
    }
    expect(() => indexTarget(undefined, 'docs')).toThrow(/none configured/);
    expect(parseIndexes(undefined)).toBeUndefined();
    expect(parseIndexes('  ')).toBeUndefined();
  });

  it('refuses malformed entries as CONFIG_INVALID, and the gateway config carries them', () => {
    for (const bad of ['docs', '=/srv', 'docs=', '../x=/srv', 'a b=/srv']) {
      expect(() => parseIndexes(bad), bad).toThrow(expect.objectContaining({ code: ErrorCode.CONFIG_INVALID }));
    }
    expect(resolveGatewayConfig({}, { SHOAL_INDEXES: 'docs=/srv/index' }).indexes).toEqual({ docs: '/srv/index' });
    expect(resolveGatewayConfig({}, {}).indexes).toBeUndefined();
  });
});
