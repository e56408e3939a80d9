import { mkdir, realpath, rm, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rejection } from '../../../helpers/rejection.js';
import { ErrorCode, ShoalError } from '../../../../adapters/protocol/errors.js';
import {
  resolveModelSource,
  resolveSourceOptions,
  type SourceOptionsInput,
} from '../../../../adapters/sources/resolve.js';
import { sourceOptionsFromEnv } from '../../../../services/settings/environment.js';
import { tempDir, writeSnapshot } from '../../../helpers/synthetic-repo.js';

/** Nothing listens here: any attempt to reach the hub would fail loudly instead of passing. */
const NO_HUB = 'http://127.0.0.1:9';
const COMMIT = 'c'.repeat(40);

let root: string;
let dirA: string;
let dirB: string;
let cache: string;
let allowed: string;
let outside: string;

async function modelFolder(path: string): Promise<string> {
  await mkdir(path, { recursive: true });
  await writeFile(join(path, 'config.json'), '{}');
  return path;
}

function options(input: SourceOptionsInput = {}) {
  return resolveSourceOptions({ hubEndpoint: NO_HUB, hubCacheDir: cache, allowDownload: false, ...input });
}

beforeAll(async () => {
  root = await realpath(await tempDir('resolve'));
  dirA = join(root, 'models-a');
  dirB = join(root, 'models-b');
  cache = join(root, 'hub');
  allowed = join(root, 'allowed');
  outside = join(root, 'outside');
  await modelFolder(join(dirA, 'org', 'mini'));
  await modelFolder(join(dirA, 'solo'));
  await modelFolder(join(dirB, 'org', 'mini'));
  await modelFolder(join(dirB, 'org', 'only-b'));
  await modelFolder(join(allowed, 'model'));
  await modelFolder(join(outside, 'secret'));
  await symlink(join(outside, 'secret'), join(allowed, 'escape'));
  await symlink(join(allowed, 'model'), join(allowed, 'alias'));
  await writeSnapshot(cache, 'org/cached', COMMIT, { 'config.json': '{}', 'onnx/model.onnx': 'graph' }, 'main');
  await writeSnapshot(cache, 'org/partial', COMMIT, { 'config.json': '{}' }, 'main');
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

describe('models directories', () => {
  it('finds org/name as <dir>/org/name, first directory first', async () => {
    const resolved = await resolveModelSource('org/mini', options({ modelDirs: [dirA, dirB] }));
    expect(resolved).toMatchObject({ dir: join(dirA, 'org', 'mini'), origin: 'models-dir' });
    expect((await resolveModelSource('org/mini', options({ modelDirs: [dirB, dirA] }))).dir).toBe(join(dirB, 'org', 'mini'));
  });

  it('looks through every directory', async () => {
    expect((await resolveModelSource('org/only-b', options({ modelDirs: [dirA, dirB] }))).dir).toBe(join(dirB, 'org', 'only-b'));
  });

  it('finds a bare name as <dir>/name', async () => {
    expect(await resolveModelSource('solo', options({ modelDirs: [dirB, dirA] }))).toMatchObject({ dir: join(dirA, 'solo'), origin: 'models-dir' });
  });

  it('skips directories that do not exist', async () => {
    expect((await resolveModelSource('solo', options({ modelDirs: [join(root, 'nope'), dirA] }))).dir).toBe(join(dirA, 'solo'));
  });

  it('is not used for an id pinned to a revision', async () => {
    const error = await rejection(resolveModelSource('org/mini@main', options({ modelDirs: [dirA] })));
    expect(error.code).toBe(ErrorCode.MODEL_NOT_FOUND);
    expect(error.message).toContain('only searched for ids without @revision');
  });

  it('comes before the hub cache', async () => {
    await modelFolder(join(dirB, 'org', 'cached'));
    expect((await resolveModelSource('org/cached', options({ modelDirs: [dirB] }))).origin).toBe('models-dir');
    expect((await resolveModelSource('org/cached', options({ modelDirs: [dirA] }))).origin).toBe('hub-cache');
  });
});

describe('hub cache', () => {
  it('serves refs/main and commit revisions without the hub', async () => {
    const snapshot = join(cache, 'models--org--cached', 'snapshots', COMMIT);
    expect(await resolveModelSource('org/cached', options())).toMatchObject({ dir: snapshot, origin: 'hub-cache' });
    expect(await resolveModelSource(`org/cached@${COMMIT}`, options())).toMatchObject({ dir: snapshot, origin: 'hub-cache' });
  });

  it('offline: MODEL_NOT_FOUND naming every place it looked', async () => {
    const error = await rejection(resolveModelSource('org/absent', options({ modelDirs: [dirA, dirB] })));
    expect(error.code).toBe(ErrorCode.MODEL_NOT_FOUND);
    expect(error.message).toContain(dirA);
    expect(error.message).toContain(dirB);
    expect(error.message).toContain(`hub cache ${cache}`);
    expect(error.message).toContain('Downloads are off');
    expect(error.details).toMatchObject({ model: 'org/absent', modelDirs: [dirA, dirB], hubCacheDir: cache });
  });

  it('offline: says so when SHOAL_MODEL_DIR is not set', async () => {
    const error = await rejection(resolveModelSource('org/absent', options()));
    expect(error.message).toContain('SHOAL_MODEL_DIR is not set');
  });

  it('offline: points at a snapshot whose download did not finish', async () => {
    const error = await rejection(resolveModelSource('org/partial', options()));
    expect(error.code).toBe(ErrorCode.MODEL_NOT_FOUND);
    expect(error.message).toContain(join(cache, 'models--org--partial', 'snapshots', COMMIT));
    expect(error.message).toContain('holds no ONNX graph');
  });

  it('rejects traversal in ids before touching the disk', async () => {
    const error = await rejection(resolveModelSource('org/..', options({ modelDirs: [dirA] })));
    expect(error.code).toBe(ErrorCode.INVALID_INPUT);
  });
});

describe('local folders', () => {
  it('resolves a folder to its real path', async () => {
    expect(await resolveModelSource(join(allowed, 'alias'), options())).toMatchObject({ dir: join(allowed, 'model'), origin: 'path' });
  });

  it('MODEL_NOT_FOUND for a folder that does not exist', async () => {
    expect((await rejection(resolveModelSource(join(root, 'missing'), options()))).code).toBe(ErrorCode.MODEL_NOT_FOUND);
  });

  it('INVALID_INPUT when local paths are switched off', async () => {
    const error = await rejection(resolveModelSource(join(allowed, 'model'), options({ allowLocalPaths: false })));
    expect(error.code).toBe(ErrorCode.INVALID_INPUT);
    expect(error.message).toContain('not allowed');
  });

  describe('with localRoots', () => {
    const rooted = () => options({ localRoots: [allowed] });

    it('accepts folders inside a root, also through links that stay inside', async () => {
      expect((await resolveModelSource(join(allowed, 'model'), rooted())).dir).toBe(join(allowed, 'model'));
      expect((await resolveModelSource(join(allowed, 'alias'), rooted())).dir).toBe(join(allowed, 'model'));
    });

    it('rejects folders outside every root', async () => {
      const error = await rejection(resolveModelSource(join(outside, 'secret'), rooted()));
      expect(error.code).toBe(ErrorCode.INVALID_INPUT);
      expect(error.message).toContain('outside the allowed roots');
    });

    it('rejects ../ escapes written inside a root', async () => {
      expect((await rejection(resolveModelSource(`${allowed}/../outside/secret`, rooted()))).code).toBe(ErrorCode.INVALID_INPUT);
    });

    it('rejects a symlink inside a root that points outside', async () => {
      const error = await rejection(resolveModelSource(join(allowed, 'escape'), rooted()));
      expect(error.code).toBe(ErrorCode.INVALID_INPUT);
      expect(error.message).toContain('outside the allowed roots');
    });

    it('does not reveal whether a folder outside the roots exists', async () => {
      const missing = await rejection(resolveModelSource(join(outside, 'nothing-here'), rooted()));
      const present = await rejection(resolveModelSource(join(outside, 'secret'), rooted()));
      expect(missing.code).toBe(ErrorCode.INVALID_INPUT);
      expect(missing.message.replace('nothing-here', 'secret')).toBe(present.message);
    });

    it('MODEL_NOT_FOUND for a missing folder inside a root', async () => {
      expect((await rejection(resolveModelSource(join(allowed, 'missing'), rooted()))).code).toBe(ErrorCode.MODEL_NOT_FOUND);
    });
  });
});

describe('source options', () => {
  it('reads the environment', () => {
    expect(
      sourceOptionsFromEnv({
        SHOAL_MODEL_DIR: '/m1::/m2',
        HF_HUB_CACHE: '/cache',
        HF_ENDPOINT: 'https://mirror.example/hf',
        HF_TOKEN: 'hf_secret',
      }),
    ).toEqual({ modelDirs: ['/m1', '/m2'], hubCacheDir: '/cache', hubEndpoint: 'https://mirror.example/hf', hubToken: 'hf_secret' });
  });

  it.each([
    [{ HF_HUB_OFFLINE: '1' }, false],
    [{ HF_HUB_OFFLINE: 'true' }, false],
    [{ HF_HUB_OFFLINE: 'YES' }, false],
    [{ SHOAL_OFFLINE: 'on' }, false],
    [{ HF_HUB_OFFLINE: '0' }, true],
    [{ HF_HUB_OFFLINE: '' }, true],
    [{}, true],
  ])('offline switch %j → allowDownload %s', (env, allowDownload) => {
    expect(resolveSourceOptions(sourceOptionsFromEnv({ HF_HUB_CACHE: '/c', ...env })).allowDownload).toBe(allowDownload);
  });

  it('reads HF_HUB_DOWNLOAD_TIMEOUT (seconds) as the idle timeout', () => {
    expect(resolveSourceOptions(sourceOptionsFromEnv({ HF_HUB_CACHE: '/c', HF_HUB_DOWNLOAD_TIMEOUT: '2.5' })).downloadIdleTimeoutMs).toBe(2500);
    expect(codeOf(() => resolveSourceOptions(sourceOptionsFromEnv({ HF_HUB_CACHE: '/c', HF_HUB_DOWNLOAD_TIMEOUT: 'soon' })))).toBe(ErrorCode.CONFIG_INVALID);
    expect(() => resolveSourceOptions(sourceOptionsFromEnv({ HF_HUB_CACHE: '/c', HF_HUB_DOWNLOAD_TIMEOUT: 'soon' }))).toThrow(/HF_HUB_DOWNLOAD_TIMEOUT/);
  });

  it('fills defaults and freezes', () => {
    const parsed = resolveSourceOptions({});
    expect(parsed).toMatchObject({ modelDirs: [], hubEndpoint: 'https://huggingface.co', allowDownload: true, allowLocalPaths: true, downloadAttempts: 4 });
    expect(Object.isFrozen(parsed)).toBe(true);
  });

  it('CONFIG_INVALID for unknown keys and non-http endpoints', () => {
    const misspelt = { modelDirs: [], modelDir: ['/m'] }; // a variable, not a literal, so TypeScript lets the typo through
    expect(codeOf(() => resolveSourceOptions(misspelt))).toBe(ErrorCode.CONFIG_INVALID);
    expect(() => resolveSourceOptions(misspelt)).toThrow(/Unrecognized key: "modelDir"/);
    expect(codeOf(() => resolveSourceOptions({ hubEndpoint: 'ftp://hub.example' }))).toBe(ErrorCode.CONFIG_INVALID);
  });
});

function codeOf(fn: () => unknown): string {
  try {
    fn();
  } catch (error) {
    return error instanceof ShoalError ? error.code : `not a ShoalError: ${String(error)}`;
  }
  return 'no error';
}
