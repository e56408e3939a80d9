import { mkdir, rm, symlink, writeFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  cachedCommit,
  findCachedSnapshot,
  inspectCachedSnapshot,
  isCommitHash,
} from '../../../../adapters/sources/hf-cache.js';
import { hubCacheDirFromEnv } from '../../../../services/settings/environment.js';
import { tempDir, writeSnapshot } from '../../../helpers/synthetic-repo.js';

const COMMIT_A = 'a'.repeat(40);
const COMMIT_B = '0123456789abcdef0123456789abcdef01234567';

let cache: string;
beforeAll(async () => {
  cache = await tempDir('hf-cache');
  await writeSnapshot(cache, 'org/mini', COMMIT_A, { 'config.json': '{}', 'onnx/model.onnx': 'graph-a' }, 'main');
  await writeSnapshot(cache, 'org/mini', COMMIT_B, { 'config.json': '{"b":1}', 'onnx/model.onnx': 'graph-b' }, 'v2');
  await writeSnapshot(cache, 'org/partial', COMMIT_A, { 'config.json': '{}' }, 'main');
  const dangling = await writeSnapshot(cache, 'org/dangling', COMMIT_A, { 'config.json': '{}' }, 'main');
  await mkdir(join(dangling, 'onnx'), { recursive: true });
  await symlink('../../../blobs/missing', join(dangling, 'onnx', 'model.onnx'));
  await mkdir(join(cache, 'models--org--junk', 'refs'), { recursive: true });
  await writeFile(join(cache, 'models--org--junk', 'refs', 'main'), 'not a commit\n');
});
afterAll(async () => {
  await rm(cache, { recursive: true, force: true });
});

describe('hubCacheDirFromEnv', () => {
  it('follows the hub library order', () => {
    expect(hubCacheDirFromEnv({ HF_HUB_CACHE: '/c', HF_HOME: '/h', XDG_CACHE_HOME: '/x' })).toBe('/c');
    expect(hubCacheDirFromEnv({ HUGGINGFACE_HUB_CACHE: '/old', HF_HOME: '/h' })).toBe('/old');
    expect(hubCacheDirFromEnv({ HF_HOME: '/h', XDG_CACHE_HOME: '/x' })).toBe('/h/hub');
    expect(hubCacheDirFromEnv({ XDG_CACHE_HOME: '/x' })).toBe('/x/huggingface/hub');
    expect(hubCacheDirFromEnv({ HF_HUB_CACHE: '' })).toBe(join(homedir(), '.cache', 'huggingface', 'hub'));
  });
});

describe('cache lookups', () => {
  it('recognizes full commit hashes only', () => {
    expect(isCommitHash(COMMIT_B)).toBe(true);
    expect(isCommitHash('main')).toBe(false);
    expect(isCommitHash('0123456')).toBe(false);
    expect(isCommitHash(COMMIT_B.toUpperCase())).toBe(false);
  });

  it('follows refs/<branch> to its snapshot', async () => {
    expect(await cachedCommit(cache, 'org/mini', 'main')).toBe(COMMIT_A);
    expect(await findCachedSnapshot(cache, 'org/mini', 'main')).toBe(join(cache, 'models--org--mini', 'snapshots', COMMIT_A));
    expect(await findCachedSnapshot(cache, 'org/mini', 'v2')).toBe(join(cache, 'models--org--mini', 'snapshots', COMMIT_B));
  });

  it('takes a commit revision as is', async () => {
    expect(await findCachedSnapshot(cache, 'org/mini', COMMIT_B)).toBe(join(cache, 'models--org--mini', 'snapshots', COMMIT_B));
    expect(await findCachedSnapshot(cache, 'org/mini', 'f'.repeat(40))).toBeNull();
  });

  it('finds nothing for unknown repos, branches and broken refs', async () => {
    expect(await findCachedSnapshot(cache, 'org/other', 'main')).toBeNull();
    expect(await findCachedSnapshot(cache, 'org/mini', 'dev')).toBeNull();
    expect(await cachedCommit(cache, 'org/junk', 'main')).toBeNull();
  });

  it('does not serve a snapshot without a readable ONNX graph', async () => {
    expect(await inspectCachedSnapshot(cache, 'org/partial', 'main')).toEqual({
      dir: join(cache, 'models--org--partial', 'snapshots', COMMIT_A),
      commit: COMMIT_A,
      usable: false,
    });
    expect(await findCachedSnapshot(cache, 'org/partial', 'main')).toBeNull();
    expect((await inspectCachedSnapshot(cache, 'org/dangling', 'main'))?.usable).toBe(false);
  });
});
