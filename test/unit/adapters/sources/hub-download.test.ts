import { createHash } from 'node:crypto';
import { lstat, mkdir, readdir, readFile, readlink, rm, stat, writeFile } from 'node:fs/promises';
import { createServer, type AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { rejection } from '../../../helpers/rejection.js';
import { ErrorCode } from '../../../../adapters/protocol/errors.js';
import { findCachedSnapshot } from '../../../../adapters/sources/hf-cache.js';
import { downloadModel, type HubOptions } from '../../../../adapters/sources/hub-download.js';
import { resolveModelSource, resolveSourceOptions, type SourceOptionsInput } from '../../../../adapters/sources/resolve.js';
import { FakeHub } from '../../../helpers/fake-hub.js';
import {
  ONNX_REPO_FP32_FILES,
  externalDataRepoContent,
  onnxRepoContent,
  pytorchOnlyRepoContent,
  tempDir,
  writeRepo,
} from '../../../helpers/synthetic-repo.js';

/** Downloads against a local fake hub serving tiny synthetic repositories (no shared kit needed). */

const GRAPH = 'onnx/model.onnx';
const SELECTED = ONNX_REPO_FP32_FILES;

let root: string;
let hub: FakeHub;
let caches = 0;

beforeAll(async () => {
  root = await tempDir('hub-download');
  hub = await FakeHub.start({
    repos: {
      'org/synth': await writeRepo(join(root, 'repos', 'synth'), onnxRepoContent()),
      'org/external': await writeRepo(join(root, 'repos', 'external'), externalDataRepoContent()),
      'org/pytorch': await writeRepo(join(root, 'repos', 'pytorch'), pytorchOnlyRepoContent()),
    },
  });
});
afterEach(() => {
  hub.faults = {};
});
afterAll(async () => {
  await hub.close();
  await rm(root, { recursive: true, force: true });
});

function freshCache(): string {
  caches += 1;
  return join(root, `cache-${caches}`);
}

function hubOptions(cacheDir: string, extra: Partial<HubOptions> = {}): HubOptions {
  return { endpoint: hub.url, cacheDir, retryDelayMs: 0, ...extra };
}

function sources(cacheDir: string, extra: SourceOptionsInput = {}) {
  return resolveSourceOptions({ hubEndpoint: hub.url, hubCacheDir: cacheDir, modelDirs: [], ...extra });
}

async function sha256Of(path: string): Promise<string> {
  return createHash('sha256').update(await readFile(path)).digest('hex');
}

async function listTree(dir: string): Promise<string[]> {
  try {
    return (await readdir(dir, { recursive: true, withFileTypes: true }))
      .filter((e) => !e.isDirectory())
      .map((e) => join(e.parentPath, e.name).slice(dir.length + 1))
      .sort();
  } catch {
    return []; // the folder was never created
  }
}

function repoDir(cacheDir: string, repo: string): string {
  return join(cacheDir, `models--${repo.replace('/', '--')}`);
}

async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  );
}

describe('full download', () => {
  it('creates the hub cache layout: blobs, snapshot links, refs/main', async () => {
    const cache = freshCache();
    const before = hub.requests.length;
    const resolved = await resolveModelSource('org/synth', sources(cache));
    const { commit } = hub.repo('org/synth');
    const repo = repoDir(cache, 'org/synth');
    expect(resolved).toMatchObject({ origin: 'download', dir: join(repo, 'snapshots', commit) });
    expect(await readFile(join(repo, 'refs', 'main'), 'utf8')).toBe(commit);
    expect(await listTree(resolved.dir)).toEqual([...SELECTED].sort());
    for (const path of SELECTED) {
      const file = hub.file('org/synth', path);
      const blobName = file.lfs ? file.sha256 : file.blobId;
      const link = join(resolved.dir, path);
      expect((await lstat(link)).isSymbolicLink(), path).toBe(true);
      const depth = path.split('/').length + 1;
      expect(await readlink(link)).toBe(`${'../'.repeat(depth)}blobs/${blobName}`);
      expect((await readFile(link)).equals(file.content), path).toBe(true);
    }
    expect(hub.file('org/synth', GRAPH).lfs).toBe(true);
    expect(hub.file('org/synth', 'config.json').lfs).toBe(false);
    expect(await listTree(join(repo, 'blobs'))).toHaveLength(SELECTED.length);
    const fetched = hub.requests.slice(before).filter((r) => r.path.includes('/resolve/')).map((r) => r.path.split(`/${commit}/`)[1]);
    expect(fetched.sort()).toEqual([...SELECTED].sort());
  });

  it('serves the second resolve from the cache without the network', async () => {
    const cache = freshCache();
    const first = await resolveModelSource('org/synth', sources(cache));
    const before = hub.requests.length;
    expect(await resolveModelSource('org/synth', sources(cache))).toMatchObject({ origin: 'hub-cache', dir: first.dir });
    expect(await resolveModelSource(`org/synth@${hub.repo('org/synth').commit}`, sources(cache))).toMatchObject({ origin: 'hub-cache', dir: first.dir });
    expect(await resolveModelSource('org/synth', sources(cache, { allowDownload: false }))).toMatchObject({ origin: 'hub-cache', dir: first.dir });
    expect(hub.requests.length).toBe(before);
  });

  it('fetches the int8 graph, and no other variant, when asked for int8', async () => {
    const dir = await downloadModel('org/synth', 'main', hubOptions(freshCache(), { precision: 'int8' }));
    const onnx = (await listTree(dir)).filter((p) => p.endsWith('.onnx'));
    expect(onnx).toEqual(['onnx/model_quantized.onnx']);
  });

  it('fetches external-data files with their graph', async () => {
    const dir = await downloadModel('org/external', 'main', hubOptions(freshCache()));
    expect(await listTree(dir)).toEqual(['config.json', 'onnx/model.onnx', 'onnx/model.onnx_data']);
    expect(await sha256Of(join(dir, 'onnx/model.onnx_data'))).toBe(hub.file('org/external', 'onnx/model.onnx_data').sha256);
  });

  it('lets concurrent callers share one transfer', async () => {
    const cache = freshCache();
    const before = hub.fileRequests('org/synth', GRAPH).length;
    const [a, b] = await Promise.all([downloadModel('org/synth', 'main', hubOptions(cache)), downloadModel('org/synth', 'main', hubOptions(cache))]);
    expect(a).toBe(b);
    expect(hub.fileRequests('org/synth', GRAPH).length - before).toBe(1);
  });
});

describe('interrupted transfers', () => {
  it('resume with a Range request and end with the right sha256', async () => {
    const cache = freshCache();
    const before = hub.fileRequests('org/synth', GRAPH).length;
    hub.faults = { drop: { file: GRAPH, afterBytes: 100_000 } };
    const dir = await downloadModel('org/synth', 'main', hubOptions(cache));
    const requests = hub.fileRequests('org/synth', GRAPH).slice(before);
    expect(requests.map((r) => [r.range, r.status])).toEqual([
      [null, 200],
      ['bytes=100000-', 206],
    ]);
    expect(await sha256Of(join(dir, GRAPH))).toBe(hub.file('org/synth', GRAPH).sha256);
  });

  it('resume across restarts from the .incomplete file left behind', async () => {
    const cache = freshCache();
    const repo = repoDir(cache, 'org/synth');
    const blob = join(repo, 'blobs', hub.file('org/synth', GRAPH).sha256);
    hub.faults = { drop: { file: GRAPH, afterBytes: 123_456 } };
    const error = await rejection(downloadModel('org/synth', 'main', hubOptions(cache, { attempts: 1 })));
    expect(error.code).toBe(ErrorCode.DOWNLOAD_FAILED);
    expect((await stat(`${blob}.incomplete`)).size).toBe(123_456);
    expect(await exists(join(repo, 'refs', 'main'))).toBe(false);
    expect(await findCachedSnapshot(cache, 'org/synth', hub.repo('org/synth').commit)).toBeNull();

    const before = hub.fileRequests('org/synth', GRAPH).length;
    const dir = await downloadModel('org/synth', 'main', hubOptions(cache));
    expect(hub.fileRequests('org/synth', GRAPH).slice(before).map((r) => r.range)).toEqual(['bytes=123456-']);
    expect(await sha256Of(join(dir, GRAPH))).toBe(hub.file('org/synth', GRAPH).sha256);
    expect(await exists(`${blob}.incomplete`)).toBe(false);
  });

  it('discard a stale .incomplete file that cannot be the start of this one', async () => {
    for (const stale of [Buffer.alloc(400_000, 7), Buffer.alloc(hub.file('org/synth', GRAPH).content.length, 7)]) {
      const cache = freshCache();
      const blob = join(repoDir(cache, 'org/synth'), 'blobs', hub.file('org/synth', GRAPH).sha256);
      await mkdir(join(blob, '..'), { recursive: true });
      await writeFile(`${blob}.incomplete`, stale);
      const before = hub.fileRequests('org/synth', GRAPH).length;
      const dir = await downloadModel('org/synth', 'main', hubOptions(cache));
      // Too long: dropped before asking; full length but wrong bytes: fails the sha256, fetched again.
      expect(hub.fileRequests('org/synth', GRAPH).slice(before).map((r) => r.range)).toEqual([null]);
      expect(await sha256Of(join(dir, GRAPH))).toBe(hub.file('org/synth', GRAPH).sha256);
    }
  });

  it('start over when the hub ignores Range', async () => {
    const cache = freshCache();
    const before = hub.fileRequests('org/synth', GRAPH).length;
    hub.faults = { drop: { file: GRAPH, afterBytes: 100_000 }, ignoreRange: true };
    const dir = await downloadModel('org/synth', 'main', hubOptions(cache));
    hub.faults = {};
    expect(hub.fileRequests('org/synth', GRAPH).slice(before).map((r) => [r.range, r.status])).toEqual([
      [null, 200],
      ['bytes=100000-', 200],
    ]);
    expect(await sha256Of(join(dir, GRAPH))).toBe(hub.file('org/synth', GRAPH).sha256);
  });

  it('time out a stalled transfer and resume it', async () => {
    const cache = freshCache();
    const before = hub.fileRequests('org/synth', GRAPH).length;
    hub.faults = { stall: { file: GRAPH, afterBytes: 50_000 } };
    const dir = await downloadModel('org/synth', 'main', hubOptions(cache, { idleTimeoutMs: 300 }));
    expect(hub.fileRequests('org/synth', GRAPH).slice(before).map((r) => r.range)).toEqual([null, 'bytes=50000-']);
    expect(await sha256Of(join(dir, GRAPH))).toBe(hub.file('org/synth', GRAPH).sha256);
  });
});

describe('failures', () => {
  it('corrupted content: DOWNLOAD_FAILED and nothing of that file left in blobs or snapshots', async () => {
    const cache = freshCache();
    const repo = repoDir(cache, 'org/synth');
    const { commit } = hub.repo('org/synth');
    const before = hub.fileRequests('org/synth', GRAPH).length;
    hub.faults = { corrupt: { file: GRAPH } };
    const error = await rejection(downloadModel('org/synth', 'main', hubOptions(cache, { attempts: 2 })));
    hub.faults = {};
    expect(error.code).toBe(ErrorCode.DOWNLOAD_FAILED);
    expect(error.message).toMatch(/sha256 [0-9a-f]{64} does not match the hub's [0-9a-f]{64} \(after 2 attempts\)/);
    expect(hub.fileRequests('org/synth', GRAPH).length - before).toBe(2);
    const blobs = await listTree(join(repo, 'blobs'));
    expect(blobs.filter((b) => b.startsWith(hub.file('org/synth', GRAPH).sha256))).toEqual([]);
    expect(blobs.filter((b) => b.endsWith('.incomplete'))).toEqual([]);
    expect(await exists(join(repo, 'snapshots', commit, GRAPH))).toBe(false);
    expect(await exists(join(repo, 'refs', 'main'))).toBe(false);
    // The snapshot folder holds the metadata fetched before the graph, but it is not served.
    const offline = await rejection(resolveModelSource(`org/synth@${commit}`, sources(cache, { allowDownload: false })));
    expect(offline.code).toBe(ErrorCode.MODEL_NOT_FOUND);
    expect(offline.message).toContain('did not finish');
  });

  it('corrupted once: the retry succeeds', async () => {
    const before = hub.fileRequests('org/synth', GRAPH).length;
    hub.faults = { corrupt: { file: GRAPH, times: 1 } };
    const dir = await downloadModel('org/synth', 'main', hubOptions(freshCache()));
    expect(hub.fileRequests('org/synth', GRAPH).length - before).toBe(2);
    expect(await sha256Of(join(dir, GRAPH))).toBe(hub.file('org/synth', GRAPH).sha256);
  });

  it('checks small files against their git blob sha1', async () => {
    hub.faults = { corrupt: { file: 'config.json' } };
    const error = await rejection(downloadModel('org/synth', 'main', hubOptions(freshCache(), { attempts: 1 })));
    hub.faults = {};
    expect(error.code).toBe(ErrorCode.DOWNLOAD_FAILED);
    expect(error.message).toMatch(/config\.json: git-sha1 [0-9a-f]{40} does not match the hub's [0-9a-f]{40}/);
  });

  it('retries a 503, but not a 400', async () => {
    let before = hub.fileRequests('org/synth', GRAPH).length;
    hub.faults = { failWith: { file: GRAPH, status: 503 } };
    await downloadModel('org/synth', 'main', hubOptions(freshCache()));
    expect(hub.fileRequests('org/synth', GRAPH).slice(before).map((r) => r.status)).toEqual([503, 200]);

    before = hub.fileRequests('org/synth', GRAPH).length;
    hub.faults = { failWith: { file: GRAPH, status: 400 } };
    const error = await rejection(downloadModel('org/synth', 'main', hubOptions(freshCache())));
    expect(error.code).toBe(ErrorCode.DOWNLOAD_FAILED);
    expect(error.details).toMatchObject({ status: 400 });
    expect(hub.fileRequests('org/synth', GRAPH).length - before).toBe(1);
  });

  it('retries a listing that failed with a 502', async () => {
    const before = hub.requests.length;
    hub.faults = { failListing: { status: 502 } };
    await downloadModel('org/external', 'main', hubOptions(freshCache()));
    const listings = hub.requests.slice(before).filter((r) => r.path.startsWith('/api/models/'));
    expect(listings.map((r) => [r.path, r.status])).toEqual([
      ['/api/models/org/external/revision/main', 502],
      ['/api/models/org/external/revision/main', 200],
    ]);
  });

  it('DOWNLOAD_FAILED naming the cache when it cannot be written', async () => {
    const file = join(root, 'a-file');
    await writeFile(file, 'not a folder');
    const error = await rejection(downloadModel('org/external', 'main', hubOptions(join(file, 'cache'))));
    expect(error.code).toBe(ErrorCode.DOWNLOAD_FAILED);
    expect(error.message).toContain(`cannot store org/external in the hub cache ${join(file, 'cache')}`);
  });

  it('a hub that cannot be reached says what to do instead (models directory, mirror)', async () => {
    // A port that was free a moment ago: connection refused at once, as on a machine without network.
    const probe = createServer();
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
    const { port } = probe.address() as AddressInfo;
    await new Promise<void>((resolve) => probe.close(() => resolve()));
    const error = await rejection(downloadModel('org/synth', 'main', hubOptions(freshCache(), { endpoint: `http://127.0.0.1:${port}`, attempts: 2 })));
    expect(error.code).toBe(ErrorCode.DOWNLOAD_FAILED);
    expect(error.message).toMatch(/ECONNREFUSED.*\(after 2 attempts\); the hub cannot be reached from this machine: .*SHOAL_MODEL_DIR.*HF_ENDPOINT/);
  });

  it('MODEL_NOT_FOUND for an unknown repository or revision', async () => {
    const unknown = await rejection(resolveModelSource('org/nothing', sources(freshCache())));
    expect(unknown.code).toBe(ErrorCode.MODEL_NOT_FOUND);
    expect(unknown.message).toContain('Repository not found');
    const revision = await rejection(resolveModelSource('org/synth@no-such-branch', sources(freshCache())));
    expect(revision.code).toBe(ErrorCode.MODEL_NOT_FOUND);
  });

  it('a repository without ONNX: a clear MODEL_NOT_FOUND, nothing fetched', async () => {
    const cache = freshCache();
    const error = await rejection(resolveModelSource('org/pytorch', sources(cache)));
    expect(error.code).toBe(ErrorCode.MODEL_NOT_FOUND);
    expect(error.message).toContain('org/pytorch@main has no ONNX graph');
    expect(error.message).toContain('model.safetensors');
    expect(error.message).toContain('optimum-cli export onnx');
    expect(hub.fileRequests('org/pytorch')).toEqual([]);
    expect(await exists(repoDir(cache, 'org/pytorch'))).toBe(false);
  });

  it('offline: MODEL_NOT_FOUND naming where it looked, without asking the hub', async () => {
    const cache = freshCache();
    const before = hub.requests.length;
    const error = await rejection(resolveModelSource('org/synth', sources(cache, { allowDownload: false, modelDirs: [join(root, 'models')] })));
    expect(error.code).toBe(ErrorCode.MODEL_NOT_FOUND);
    expect(error.message).toContain(join(root, 'models'));
    expect(error.message).toContain(cache);
    expect(hub.requests.length).toBe(before);
  });
});

describe('tokens', () => {
  let gated: FakeHub;
  beforeAll(async () => {
    gated = await FakeHub.start({ repos: { 'org/gated': join(root, 'repos', 'synth') }, token: 'hf_secret' });
  });
  afterAll(async () => {
    await gated.close();
  });

  it('without HF_TOKEN: MODEL_NOT_FOUND that says to set it', async () => {
    const error = await rejection(resolveModelSource('org/gated', resolveSourceOptions({ hubEndpoint: gated.url, hubCacheDir: freshCache() })));
    expect(error.code).toBe(ErrorCode.MODEL_NOT_FOUND);
    expect(error.message).toContain('HTTP 401');
    expect(error.message).toContain('HF_TOKEN');
  });

  it('sends the token as a Bearer header on every request', async () => {
    const before = gated.requests.length;
    const resolved = await resolveModelSource('org/gated', resolveSourceOptions({ hubEndpoint: gated.url, hubCacheDir: freshCache(), hubToken: 'hf_secret' }));
    expect(resolved.origin).toBe('download');
    const requests = gated.requests.slice(before);
    expect(requests).toHaveLength(1 + SELECTED.length);
    expect(new Set(requests.map((r) => r.authorization))).toEqual(new Set(['Bearer hf_secret']));
    expect(new Set(requests.map((r) => r.status))).toEqual(new Set([200]));
  });
});

describe('a hostile mirror', () => {
  it('sending more than the size it lists: the transfer is cut at that size, DOWNLOAD_FAILED, nothing oversized on disk', async () => {
    // The listing promises a 64-byte graph; the file request answers with an endless body.
    const { createServer: createHttpServer } = await import('node:http');
    const commit = 'c'.repeat(40);
    const listed = 64;
    let cut = 0;
    const server = createHttpServer((req, res) => {
      if ((req.url ?? '').startsWith('/api/models/')) {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ sha: commit, siblings: [{ rfilename: 'config.json', size: 2 }, { rfilename: 'onnx/model.onnx', size: listed, lfs: { sha256: 'a'.repeat(64), size: listed } }] }));
        return;
      }
      if ((req.url ?? '').endsWith('/config.json')) {
        res.end('{}');
        return;
      }
      res.writeHead(200, { 'content-type': 'application/octet-stream' });
      const chunk = Buffer.alloc(64 * 1024, 7);
      const pump = (): void => {
        while (!res.destroyed && res.write(chunk));
        if (!res.destroyed) res.once('drain', pump);
      };
      res.on('close', () => (cut += 1));
      pump();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const cacheDir = freshCache();
    try {
      const endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      const error = await rejection(downloadModel('org/endless', 'main', { endpoint, cacheDir, retryDelayMs: 0, attempts: 2 }));
      expect(error.code).toBe(ErrorCode.DOWNLOAD_FAILED);
      expect(error.message).toContain(`more than the ${listed} bytes`);
      expect(cut).toBeGreaterThan(0);
      const blobs = join(repoDir(cacheDir, 'org/endless'), 'blobs');
      for (const name of await listTree(blobs)) expect((await stat(join(blobs, name))).size).toBeLessThanOrEqual(listed);
    } finally {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  }, 15_000);
});
