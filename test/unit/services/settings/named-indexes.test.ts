import { describe, expect, it } from 'vitest';
import { namedIndexesFromEnv } from '../../../../services/settings/environment.js';
import { resolveGatewayConfig } from '../../../../services/gateway/config.js';

/** SHOAL_INDEXES as the results sink and `shoal submit` read it, and the names the gateway allows as job index targets. */

describe('namedIndexesFromEnv', () => {
  it('reads name=URI pairs and is undefined when unset', () => {
    expect(namedIndexesFromEnv({ SHOAL_INDEXES: ' vecs=postgres://u@db:5432/s?table=t , local=/srv/idx ' })).toEqual({ vecs: 'postgres://u@db:5432/s?table=t', local: '/srv/idx' });
    expect(namedIndexesFromEnv({})).toBeUndefined();
  });

  it('refuses a malformed entry without printing a password', () => {
    let message = '';
    try {
      namedIndexesFromEnv({ SHOAL_INDEXES: 'bad name=postgres://u:secret@db/s' });
    } catch (error) {
      message = error instanceof Error ? error.message : String(error);
    }
    expect(message).toMatch(/SHOAL_INDEXES: .* must be name=target/);
    expect(message).not.toContain('secret');
    // Generated passwords hold '/' and '@', which the old pattern stopped at.
    for (const password of ['s3cr/et', 'p@ss/w@rd']) {
      let shown = '';
      try {
        namedIndexesFromEnv({ SHOAL_INDEXES: `bad name=postgres://u:${password}@db/s` });
      } catch (error) {
        shown = error instanceof Error ? error.message : String(error);
      }
      expect(shown).toContain('"bad name=postgres://u:***@db/s"');
      expect(shown).not.toContain(password);
    }
  });
});

describe('gateway job index targets', () => {
  it('are the SHOAL_INDEXES names (the indexes of the gateway)', () => {
    expect(Object.keys(resolveGatewayConfig({}, { SHOAL_INDEXES: 'docs=/srv/docs,vecs=/srv/vecs' }).indexes ?? {})).toEqual(['docs', 'vecs']);
    expect(resolveGatewayConfig({}, {}).indexes).toBeUndefined();
  });
});
