import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ErrorCode } from '../../../../adapters/protocol/errors.js';
import { resolveCliConfig } from '../../../../services/cli/config.js';
import { resolveGatewayConfig } from '../../../../services/gateway/config.js';
import { configPathFrom, readConfigFile, withConfigFile } from '../../../../services/settings/config-file.js';
import { parseWorkerConfig, workerConfigFromEnv } from '../../../../services/worker/config.js';
import { FIXTURES_DIR } from '../../../helpers/shared.js';
import { runShoal } from '../../../helpers/shoal-cli.js';

let dir: string;
const file = (name: string, text: string): string => {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
};

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'shoal-config-file-'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('settings file', () => {
  it('maps table names and variable names to variables; lists join as the variable is written', () => {
    const path = file('a.yaml', 'memoryBudget: 3GiB\nmodels: [org/a, org/b]\nmodelDir: [/m1, /m2]\nconcurrency: 7\nNATS_PASSWORD: s3cret\nmetricsAuth: true\n');
    expect(readConfigFile(path)).toEqual({
      SHOAL_MEMORY_BUDGET: '3GiB',
      SHOAL_MODELS: 'org/a,org/b',
      SHOAL_MODEL_DIR: '/m1:/m2',
      SHOAL_CONCURRENCY: '7',
      NATS_PASSWORD: 's3cret',
      SHOAL_METRICS_AUTH: 'true',
    });
  });

  it('sits beneath the environment: flags → variables → file → defaults, for every service', () => {
    const path = file('b.json', JSON.stringify({ threads: 3, port: 9000, concurrency: 7, memoryBudget: '3GiB' }));
    const env = withConfigFile({ SHOAL_THREADS: '2', SHOAL_PORT: '' }, path);
    expect(resolveCliConfig({}, env).engine).toMatchObject({ threads: 2, memoryBudget: '3GiB' });
    expect(resolveCliConfig({ threads: '1' }, env).engine.threads).toBe(1);
    expect(resolveGatewayConfig({}, env).port).toBe(9000);
    expect(parseWorkerConfig(workerConfigFromEnv(env))).toMatchObject({ concurrency: 7, engine: { threads: 2 } });
    expect(withConfigFile({ A: '1' }, undefined)).toEqual({ A: '1' });
  });

  it('refuses unknown keys, nested values, unreadable and malformed files with CONFIG_INVALID naming the file', () => {
    const cases: [string, RegExp][] = [
      [file('c.yaml', 'memoryBudgett: 3GiB\n'), /unknown setting "memoryBudgett"/],
      [file('d.yaml', 'models:\n  a: 1\n'), /models: expected a setting name/],
      [file('e.yaml', 'models: [a\n'), /not valid YAML or JSON/],
      [file('f.yaml', 'config: other.yaml\n'), /cannot name another one/],
      [join(dir, 'missing.yaml'), /cannot read the settings file/],
    ];
    for (const [path, message] of cases) {
      let error: unknown;
      try {
        readConfigFile(path);
      } catch (caught) {
        error = caught;
      }
      expect(error, path).toMatchObject({ code: ErrorCode.CONFIG_INVALID, message: expect.stringMatching(message) });
      expect(String((error as Error).message)).toContain(path);
    }
  });

  it('is found by --config FILE, --config=FILE or SHOAL_CONFIG', () => {
    expect(configPathFrom(['node', 'shoal', 'encode', '--config', 'x.yaml'], {})).toBe('x.yaml');
    expect(configPathFrom(['--config=y.yaml'], { SHOAL_CONFIG: 'z.yaml' })).toBe('y.yaml');
    expect(configPathFrom([], { SHOAL_CONFIG: 'z.yaml' })).toBe('z.yaml');
    expect(configPathFrom(['--', '--config', 'x'], {})).toBeUndefined();
  });

  it('shoal encode takes its models directory from --config', async () => {
    const path = file('cli.yaml', `modelDir: ${join(FIXTURES_DIR, 'models')}\n`);
    const run = await runShoal(['encode', '--config', path, '--model', 'tiny-bert-mean'], { stdin: '{"id":"a","text":"hello"}\n', env: { SHOAL_MODEL_DIR: '' } });
    expect(run.code, run.stderr).toBe(0);
    expect(JSON.parse(run.stdout.trim())).toMatchObject({ id: 'a', dense: expect.any(Array) });
    const bad = await runShoal(['encode', '--config', join(dir, 'nope.yaml'), '--model', 'tiny-bert-mean'], { stdin: '' });
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/error \[CONFIG_INVALID\]: cannot read the settings file/);
  });
});
