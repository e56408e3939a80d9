import { mkdtempSync, rmSync } from 'node:fs';
import { mkdir, readdir, readFile, stat, truncate, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as ort from 'onnxruntime-node';
import {
  decodeOnnx,
  quantizeModel,
  quantizeToCache,
  readOnnx,
  rememberedSha256,
  serializeOnnx,
  sha256File,
  QUANTIZER_VERSION,
} from '../../../../adapters/quantize/index.js';
import { tinyGraph } from './tiny-graph.js';

/**
 * The quantized-graph cache: built once and then served, keyed by the source bytes and options,
 * source never modified, damaged entries rebuilt, external-data sources written self-contained,
 * and models past protobuf's 2 GB limit written with external data that onnxruntime loads.
 */

let root: string;
let inline: string;
let external: string;

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), 'shoal-quantize-cache-'));
  inline = join(root, 'inline', 'model.onnx');
  external = join(root, 'external', 'model.onnx');
  const plain = tinyGraph();
  const split = tinyGraph({ externalWeights: true });
  await writeFileMk(inline, plain.onnx);
  await writeFileMk(external, split.onnx);
  await writeFileMk(join(root, 'external', 'model.onnx_data'), split.external ?? new Uint8Array());
});

afterAll(() => {
  rmSync(root, { recursive: true, force: true });
});

async function writeFileMk(path: string, bytes: Uint8Array): Promise<void> {
  await mkdir(dirname(path), { recursive: true });
  await writeFile(path, bytes);
}

function cacheDir(name: string): string {
  return join(root, 'caches', name);
}

describe('quantizeToCache', () => {
  it('builds once, then serves the cached graph; the source file is never modified', async () => {
    const before = { sha: await sha256File(inline), mtime: (await stat(inline)).mtimeMs };
    const first = await quantizeToCache({ source: inline, options: { minWeightElements: 0 }, cacheDir: cacheDir('a') });
    expect(first.built).toBe(true);
    expect(first.path).toBe(join(cacheDir('a'), `${first.key}.onnx`));
    expect(first.record).toMatchObject({ quantizer: QUANTIZER_VERSION, alreadyQuantized: false, inputVocab: 10, fidelity: null });
    expect(first.record.report).toMatchObject({ matmul: 1, gemm: 1 });
    const cachedAt = (await stat(first.path)).mtimeMs;
    // The record's fingerprint (hashed from the bytes in memory as they were written) is the file's.
    expect(first.record.output?.graph).toEqual({ file: `${first.key}.onnx`, bytes: (await stat(first.path)).size, sha256: await sha256File(first.path), mtimeMs: cachedAt });

    const second = await quantizeToCache({ source: inline, options: { minWeightElements: 0 }, cacheDir: cacheDir('a') });
    expect(second.built).toBe(false);
    expect(second.path).toBe(first.path);
    expect(second.record).toEqual(first.record);
    expect((await stat(second.path)).mtimeMs).toBe(cachedAt);
    expect(await sha256File(inline)).toBe(before.sha);
    expect((await stat(inline)).mtimeMs).toBe(before.mtime);
    // Temporary files from the atomic writes are gone: the graph and its record only.
    expect((await readdir(cacheDir('a'))).sort()).toEqual([`${first.key}.json`, `${first.key}.onnx`]);
  });

  it('is deterministic: two caches get byte-identical graphs, equal to an in-memory rewrite', async () => {
    const a = await quantizeToCache({ source: inline, options: { minWeightElements: 0 }, cacheDir: cacheDir('a') });
    const b = await quantizeToCache({ source: inline, options: { minWeightElements: 0 }, cacheDir: cacheDir('b') });
    expect(b.built).toBe(true);
    expect(await sha256File(b.path)).toBe(await sha256File(a.path));
    const model = decodeOnnx(tinyGraph().onnx, 'tiny');
    quantizeModel(model, { minWeightElements: 0 });
    const inMemory = serializeOnnx(model, 'unused').graph;
    expect(Buffer.compare(await readFile(a.path), Buffer.from(inMemory.buffer, inMemory.byteOffset, inMemory.byteLength))).toBe(0);
  });

  it('keys entries by options: another threshold is another entry', async () => {
    const a = await quantizeToCache({ source: inline, options: { minWeightElements: 0 }, cacheDir: cacheDir('a') });
    const other = await quantizeToCache({ source: inline, options: { minWeightElements: 1_000_000 }, cacheDir: cacheDir('a') });
    expect(other.key).not.toBe(a.key);
    // Nothing is large enough: no graph is written and the source is used as is.
    expect(other.record.output).toBeNull();
    expect(other.path).toBe(inline);
    expect(other.record.report.skippedSmall).toBe(2);
  });

  it('rebuilds a truncated graph and an unreadable record', async () => {
    const good = await quantizeToCache({ source: inline, options: { minWeightElements: 0 }, cacheDir: cacheDir('c') });
    const sha = await sha256File(good.path);
    await truncate(good.path, 100);
    const repaired = await quantizeToCache({ source: inline, options: { minWeightElements: 0 }, cacheDir: cacheDir('c') });
    expect(repaired.built).toBe(true);
    expect(await sha256File(repaired.path)).toBe(sha);

    await writeFile(good.recordPath, '{"format": 1, "quantizer": ');
    const again = await quantizeToCache({ source: inline, options: { minWeightElements: 0 }, cacheDir: cacheDir('c') });
    expect(again.built).toBe(true);
    expect(await sha256File(again.path)).toBe(sha);
    expect((await quantizeToCache({ source: inline, options: { minWeightElements: 0 }, cacheDir: cacheDir('c') })).built).toBe(false);
  });

  it('reads external-data sources and writes a self-contained graph identical to the inline source', async () => {
    const fromExternal = await quantizeToCache({ source: external, options: { minWeightElements: 0 }, cacheDir: cacheDir('d') });
    const fromInline = await quantizeToCache({ source: inline, options: { minWeightElements: 0 }, cacheDir: cacheDir('d') });
    expect(fromExternal.record.source.external.map((f) => f.file)).toEqual(['model.onnx_data']);
    expect(fromExternal.record.output?.external).toBeNull();
    expect(await sha256File(fromExternal.path)).toBe(await sha256File(fromInline.path));
    // Changing the external data invalidates the entry even though model.onnx is unchanged.
    const data = join(root, 'external', 'model.onnx_data');
    const bytes = await readFile(data);
    bytes.writeFloatLE(0.75, 0);
    await writeFile(data, bytes);
    const rebuilt = await quantizeToCache({ source: external, options: { minWeightElements: 0 }, cacheDir: cacheDir('d') });
    expect(rebuilt.built).toBe(true);
    expect(await sha256File(rebuilt.path)).not.toBe(await sha256File(fromInline.path));
  });

  it('past the self-contained limit, tensors go to an aligned external-data file that onnxruntime loads', async () => {
    const loaded = await readOnnx(inline);
    quantizeModel(loaded.model, { minWeightElements: 0 });
    const serialized = serializeOnnx(loaded.model, 'big.onnx.data', 1);
    expect(serialized.external).not.toBeNull();
    const dir = join(root, 'split');
    await writeFileMk(join(dir, 'big.onnx'), serialized.graph);
    await writeFile(join(dir, 'big.onnx.data'), Buffer.concat(serialized.external ?? []));
    const reference = await ort.InferenceSession.create(new Uint8Array(await readFile((await quantizeToCache({ source: inline, options: { minWeightElements: 0 }, cacheDir: cacheDir('a') })).path)));
    const split = await ort.InferenceSession.create(join(dir, 'big.onnx'), { logSeverityLevel: 3 });
    try {
      const ids = new ort.Tensor('int64', BigInt64Array.from([3, 1, 4, 1, 5, 9], (v) => BigInt(v)), [1, 6]);
      const [a, b] = [await reference.run({ input_ids: ids }), await split.run({ input_ids: ids })];
      expect(b.logits?.data).toEqual(a.logits?.data);
      expect(b.hidden?.data).toEqual(a.hidden?.data);
    } finally {
      await reference.release();
      await split.release();
    }
  });
});

describe('rememberedSha256 (the source hash an int8 load keys its cache by)', () => {
  const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

  it('remembers a settled file and answers from the memo while its stat is unchanged', async () => {
    const dir = cacheDir('memo-a');
    const file = join(root, 'memo-a.bin');
    await writeFileMk(file, new Uint8Array(4096).fill(7));
    const real = await sha256File(file);
    expect(await rememberedSha256(file, dir, 0)).toBe(real);
    const [memoName] = await readdir(join(dir, 'sources'));
    expect(memoName).toMatch(/^[0-9a-f]{64}\.json$/);
    // A forged hash in the memo comes back: proof that the file was not read again.
    const memoPath = join(dir, 'sources', memoName ?? '');
    const memo = JSON.parse(await readFile(memoPath, 'utf8')) as Record<string, unknown>;
    expect(memo.sha256).toBe(real);
    await writeFile(memoPath, JSON.stringify({ ...memo, sha256: 'f'.repeat(64) }));
    expect(await rememberedSha256(file, dir, 0)).toBe('f'.repeat(64));
  });

  it('hashes again a file rewritten since, even with the same size and its old mtime put back', async () => {
    const dir = cacheDir('memo-b');
    const file = join(root, 'memo-b.bin');
    await writeFileMk(file, new Uint8Array(4096).fill(1));
    const first = await rememberedSha256(file, dir, 0);
    const { mtime } = await stat(file);
    await sleep(30);
    await writeFile(file, new Uint8Array(4096).fill(2));
    await utimes(file, mtime, mtime);
    const second = await rememberedSha256(file, dir, 0);
    expect(second).not.toBe(first);
    expect(second).toBe(await sha256File(file));
  });

  it('does not remember a file changed less than settleMs before it was hashed', async () => {
    const dir = cacheDir('memo-c');
    const file = join(root, 'memo-c.bin');
    await writeFileMk(file, new Uint8Array(64).fill(3));
    expect(await rememberedSha256(file, dir)).toBe(await sha256File(file));
    expect(await readdir(join(dir, 'sources')).catch(() => [])).toEqual([]);
  });

  it('keys a rewritten source (same size) as a new cache entry', async () => {
    const dir = cacheDir('memo-d');
    const file = join(root, 'memo-d', 'model.onnx');
    await writeFileMk(file, await readFile(inline));
    const before = await quantizeToCache({ source: file, options: { minWeightElements: 0 }, cacheDir: dir });
    const again = await quantizeToCache({ source: file, options: { minWeightElements: 0 }, cacheDir: dir });
    expect(again.built).toBe(false);
    expect(again.key).toBe(before.key);
    // Same graph with one weight changed: the same size, another key.
    const model = (await readOnnx(file)).model;
    const weight = model.graph?.initializer?.find((tensor) => tensor.name === 'W1');
    const raw = weight?.rawData;
    if (raw === undefined || raw === null || raw.length === 0) throw new Error('tinyGraph has no raw W1');
    raw[0] = (raw[0] ?? 0) ^ 0x01;
    const rewritten = serializeOnnx(model, 'unused').graph;
    expect(rewritten.byteLength).toBe((await stat(file)).size);
    await sleep(30);
    await writeFile(file, rewritten);
    const changed = await quantizeToCache({ source: file, options: { minWeightElements: 0 }, cacheDir: dir });
    expect(changed.key).not.toBe(before.key);
    expect(changed.built).toBe(true);
  });

  it('checks cached graphs by size and time, adds the times to older records, and still rebuilds a damaged graph', async () => {
    const dir = cacheDir('timed');
    const built = await quantizeToCache({ source: inline, options: { minWeightElements: 0 }, cacheDir: dir });
    expect(built.record.output?.graph.mtimeMs).toBe((await stat(built.path)).mtimeMs);
    // A record as earlier versions wrote it: no time, so the next load hashes the graph once and adds it.
    const old = JSON.parse(await readFile(built.recordPath, 'utf8')) as { output: { graph: Record<string, unknown> } };
    delete old.output.graph.mtimeMs;
    await writeFile(built.recordPath, JSON.stringify(old));
    const served = await quantizeToCache({ source: inline, options: { minWeightElements: 0 }, cacheDir: dir });
    expect(served.built).toBe(false);
    const upgraded = JSON.parse(await readFile(built.recordPath, 'utf8')) as { output: { graph: { mtimeMs?: number } } };
    expect(upgraded.output.graph.mtimeMs).toBe((await stat(built.path)).mtimeMs);
    // Damaged in place, same size: its time moved, so it is hashed, found wrong and rebuilt.
    await sleep(30);
    const bytes = await readFile(built.path);
    bytes[bytes.length - 1] = (bytes[bytes.length - 1] ?? 0) ^ 0xff;
    await writeFile(built.path, bytes);
    const repaired = await quantizeToCache({ source: inline, options: { minWeightElements: 0 }, cacheDir: dir });
    expect(repaired.built).toBe(true);
    expect(await sha256File(repaired.path)).toBe(built.record.output?.graph.sha256);
  });
});
