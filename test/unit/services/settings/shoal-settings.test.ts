import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ErrorCode } from '../../../../adapters/protocol/errors.js';
import { ShoalSettings } from '../../../../services/settings/shoal-settings.js';

/** One frozen ShoalSettings per process (issue 34): built once from the environment over the settings file. */

const dir = await mkdtemp(join(tmpdir(), 'shoal-settings-'));
afterAll(() => rm(dir, { recursive: true, force: true }));

describe('ShoalSettings', () => {
  it('puts the settings file beneath the environment, named by --config or SHOAL_CONFIG', async () => {
    const file = join(dir, 'shoal.yaml');
    await writeFile(file, 'subjectPrefix: from-file\ncacheDir: /srv/cache\nPGPASSWORD: file-secret\n');
    const byFlag = ShoalSettings.load(['node', 'shoal', 'search', '--config', file], { SHOAL_SUBJECT_PREFIX: 'from-env' });
    expect(byFlag.value('subjectPrefix')).toBe('from-env');
    expect(byFlag.cacheDir).toBe('/srv/cache');
    expect(byFlag.stores.pgPassword).toBe('file-secret');
    const byVariable = ShoalSettings.load(['node', 'shoal'], { SHOAL_CONFIG: file });
    expect(byVariable.value('subjectPrefix')).toBe('from-file');
  });

  it('is frozen: the variables are copied when it is built, and each group is resolved once', () => {
    const env: NodeJS.ProcessEnv = { SHOAL_INDEXES: 'docs=/srv/docs', AWS_REGION: 'eu-west-1' };
    const settings = ShoalSettings.of(env);
    env.SHOAL_INDEXES = 'other=/tmp/x';
    env.AWS_REGION = 'us-east-1';
    expect(settings.indexes).toEqual({ docs: '/srv/docs' });
    expect(settings.s3.region).toBe('eu-west-1');
    expect(settings.s3).toBe(settings.s3);
    expect(Object.isFrozen(settings)).toBe(true);
    expect(Object.isFrozen(settings.variables)).toBe(true);
    expect(Object.isFrozen(settings.stores)).toBe(true);
    expect(ShoalSettings.from(settings)).toBe(settings);
  });

  it('checks a group only when it is asked for, then names the variable', () => {
    const settings = ShoalSettings.of({ SHOAL_STORE_TIMEOUT_MS: 'soon', SHOAL_SUBJECT_PREFIX: 'acme' });
    // A command that never opens an index is not stopped by a store setting it does not use.
    expect(settings.topology().prefix).toBe('acme');
    expect(() => settings.stores).toThrow(expect.objectContaining({ code: ErrorCode.CONFIG_INVALID, message: expect.stringContaining('SHOAL_STORE_TIMEOUT_MS') }));
  });
});
