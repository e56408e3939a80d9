import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { downloadModel, type DownloadProgress, type HubOptions } from '../../../../adapters/sources/hub-download.js';
import { FakeHub } from '../../../helpers/fake-hub.js';
import { ONNX_REPO_FP32_FILES, onnxRepoContent, tempDir, writeRepo } from '../../../helpers/synthetic-repo.js';

/** Progress events of a download, as the CLI's bars consume them (see download-progress.ts). */

const GRAPH = 'onnx/model.onnx';
const SELECTED = ONNX_REPO_FP32_FILES;

let root: string;
let hub: FakeHub;
let caches = 0;

beforeAll(async () => {
  root = await tempDir('download-progress');
  hub = await FakeHub.start({ repos: { 'org/synth': await writeRepo(join(root, 'repo'), onnxRepoContent()) } });
});
afterEach(() => {
  hub.faults = {};
});
afterAll(async () => {
  await hub.close();
  await rm(root, { recursive: true, force: true });
});

function hubOptions(extra: Partial<HubOptions> = {}, cacheDir = join(root, `cache-${(caches += 1)}`)): HubOptions {
  return { endpoint: hub.url, cacheDir, retryDelayMs: 0, ...extra };
}

describe('progress', () => {
  function byFile(events: DownloadProgress[]): Map<string, DownloadProgress[]> {
    const out = new Map<string, DownloadProgress[]>();
    for (const event of events) out.set(event.file, [...(out.get(event.file) ?? []), event]);
    return out;
  }

  it('reports each file from start to one done event, with repository totals', async () => {
    const events: DownloadProgress[] = [];
    await downloadModel('org/synth', 'main', hubOptions({ onProgress: (e) => events.push(e) }));
    const files = byFile(events);
    expect([...files.keys()]).toEqual(SELECTED);
    const total = SELECTED.reduce((sum, path) => sum + hub.file('org/synth', path).content.length, 0);
    SELECTED.forEach((path, i) => {
      const list = files.get(path) ?? [];
      const size = hub.file('org/synth', path).content.length;
      expect(list[0]).toMatchObject({ receivedBytes: 0, totalBytes: size, done: false, fileIndex: i + 1, fileCount: SELECTED.length });
      expect(list.filter((e) => e.done)).toEqual([list.at(-1)]);
      expect(list.at(-1)).toMatchObject({ receivedBytes: size, done: true, cached: false, repoTotalBytes: total });
      const received = list.map((e) => e.receivedBytes);
      expect(received).toEqual([...received].sort((a, b) => a - b));
    });
    // 300 KiB in chunks of at most 64 KiB, merged into steps of at least 256 KiB: start, one step, the end.
    expect((files.get(GRAPH) ?? []).filter((e) => !e.done).length).toBeLessThanOrEqual(3);
    expect(events.at(-1)).toMatchObject({ file: GRAPH, repoReceivedBytes: total, repoTotalBytes: total, revision: 'main', repo: 'org/synth' });
    const repoReceived = events.map((e) => e.repoReceivedBytes);
    expect(repoReceived).toEqual([...repoReceived].sort((a, b) => a - b));
  });

  it('starts a resumed file at the bytes already kept', async () => {
    const events: DownloadProgress[] = [];
    hub.faults = { drop: { file: GRAPH, afterBytes: 100_000 } };
    await downloadModel('org/synth', 'main', hubOptions({ onProgress: (e) => events.push(e) }));
    const size = hub.file('org/synth', GRAPH).content.length;
    // First transfer: its start; second transfer: its start at the kept bytes, then the last chunk.
    // (Steps are at least 256 KiB, so no event falls in between for a 300 KiB file.)
    const progress = (byFile(events).get(GRAPH) ?? []).filter((e) => !e.done).map((e) => e.receivedBytes);
    expect(progress).toEqual([0, 100_000, size]);
  });

  it('reports files the cache already holds as done and cached', async () => {
    const cache = join(root, 'cache-shared');
    await downloadModel('org/synth', 'main', hubOptions({}, cache));
    const before = hub.fileRequests('org/synth').length;
    const events: DownloadProgress[] = [];
    await downloadModel('org/synth', 'main', hubOptions({ onProgress: (e) => events.push(e) }, cache));
    expect(hub.fileRequests('org/synth').length).toBe(before);
    expect(events.map((e) => [e.file, e.done, e.cached])).toEqual(SELECTED.map((path) => [path, true, true]));
  });
});
