import { chmodSync, cpSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sha256File } from '../../../../adapters/quantize/cache-files.js';
import { mappedCacheDir, mappedGraph } from '../../../../adapters/quantize/mapped-graph.js';
import { readOnnx } from '../../../../adapters/quantize/onnx-file.js';
import { createSession, ort } from '../../../../adapters/runtime/ort-session.js';
import { resolveRuntimeOptions } from '../../../../adapters/runtime/runtime-options.js';
import { InferenceEngine } from '../../../../pipelines/inference/engine.js';
import { CONFORMANCE_DIR } from '../../../helpers/shared.js';
import { tinyGraph } from './tiny-graph.js';

/**
 * Mapped copies of graphs (weights in a page-aligned external-data file onnxruntime maps): the
 * same outputs as the source on real layouts, built once and then reused, rebuilt when damaged,
 * a new copy for a changed source, and the source itself whenever no copy can or should be made.
 */

const RUNTIME = resolveRuntimeOptions({ intraOpThreads: 1 });
const ALL = { minBytes: 0 };

let root: string;

beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), 'shoal-mapped-'));
});

afterAll(() => {
  rmSync(root, { recursive: true, force: true });
});

/** Deterministic inputs for a text or image graph's inputs (2 rows of 7 tokens, or 2 images). */
function feedsFor(session: ort.InferenceSession): Record<string, ort.Tensor> {
  const rows = 2;
  const tokens = 7;
  const feeds: Record<string, ort.Tensor> = {};
  for (const meta of session.inputMetadata) {
    if (!meta.isTensor) throw new Error(`unexpected input ${meta.name}`);
    if (meta.name === 'pixel_values') {
      const values = new Float32Array(rows * 3 * 224 * 224).map((_, i) => Math.sin(i * 0.37));
      feeds[meta.name] = new ort.Tensor('float32', values, [rows, 3, 224, 224]);
      continue;
    }
    const values = new BigInt64Array(rows * tokens);
    for (let i = 0; i < values.length; i++) {
      const position = i % tokens;
      if (meta.name === 'input_ids') values[i] = BigInt(((i * 7 + 3) % 90) + 5);
      else if (meta.name === 'attention_mask') values[i] = i >= tokens && position >= 5 ? 0n : 1n;
      else if (meta.name === 'position_ids') values[i] = BigInt(position);
      else values[i] = 0n;
    }
    feeds[meta.name] = new ort.Tensor('int64', values, [rows, tokens]);
  }
  return feeds;
}

async function outputsOf(path: string): Promise<Record<string, Float32Array>> {
  const { session } = await createSession(path, RUNTIME);
  try {
    const results = await session.run(feedsFor(session));
    return Object.fromEntries(Object.entries(results).map(([name, tensor]) => [name, Float32Array.from(tensor.data as Float32Array)]));
  } finally {
    await session.release();
  }
}

const LAYOUTS = [
  ['bert-mean-embed', 'model.onnx'],
  ['xlmr-mean-embed', 'model.onnx'],
  ['modernbert-mean-embed', 'model.onnx'],
  ['qwen2-last-embed', 'model.onnx'],
  ['dense-projection-embed', 'model.onnx'],
  ['clip', 'text_model.onnx'],
  ['clip', 'vision_model.onnx'],
] as const;

describe('mapped copies of real layouts', () => {
  it.each(LAYOUTS)('%s/%s: the copy gives exactly the outputs of the source', async (model, file) => {
    const source = join(CONFORMANCE_DIR, model, 'onnx', file);
    const copy = await mappedGraph(source, join(root, 'layouts'), ALL);
    expect(copy.mapped).toBe(true);
    expect(copy.built).toBe(true);
    // The graph file holds no weights any more: they are in the .weights file beside it.
    expect(statSync(copy.path).size).toBeLessThan(statSync(source).size / 4);
    const [expected, actual] = [await outputsOf(source), await outputsOf(copy.path)];
    expect(Object.keys(actual).sort()).toEqual(Object.keys(expected).sort());
    for (const name of Object.keys(expected)) expect(actual[name]).toEqual(expected[name]);
  });
});

describe('the mapped cache', () => {
  const source = join(CONFORMANCE_DIR, 'bert-mean-embed', 'onnx', 'model.onnx');

  it('writes every large tensor at a 4 KiB-aligned offset of the weights file', async () => {
    const copy = await mappedGraph(source, join(root, 'aligned'), ALL);
    const loaded = (await import('../../../../adapters/quantize/onnx-file.js')).decodeOnnx(readFileSync(copy.path), copy.path);
    const offsets = (loaded.graph?.initializer ?? [])
      .filter((tensor) => tensor.dataLocation === 1)
      .map((tensor) => Number(tensor.externalData?.find((entry) => entry.key === 'offset')?.value));
    expect(offsets.length).toBeGreaterThan(10);
    for (const offset of offsets) expect(offset % 4096).toBe(0);
    // Reading the copy back (external data inlined) gives the source's tensors byte for byte.
    const [original, roundTrip] = [await readOnnx(source), await readOnnx(copy.path)];
    const bytes = (model: typeof original.model): Map<string, string> =>
      new Map((model.graph?.initializer ?? []).map((t) => [t.name ?? '', Buffer.from(t.rawData ?? new Uint8Array()).toString('base64')]));
    expect(bytes(roundTrip.model)).toEqual(bytes(original.model));
  });

  it('is built once: a second call reuses the copy without writing it again', async () => {
    const cache = join(root, 'reuse');
    const first = await mappedGraph(source, cache, ALL);
    const written = statSync(first.path).mtimeMs;
    const second = await mappedGraph(source, cache, ALL);
    expect(second).toEqual({ path: first.path, mapped: true, built: false });
    expect(statSync(second.path).mtimeMs).toBe(written);
    expect(readdirSync(mappedCacheDir(cache)).sort()).toEqual(
      ['.json', '.onnx', '.weights'].map((ext) => first.path.replace(/\.onnx$/, ext).split('/').pop()).sort(),
    );
    // The record's fingerprints, hashed from the bytes as they were written, are those of the files.
    const record: unknown = JSON.parse(readFileSync(first.path.replace(/\.onnx$/, '.json'), 'utf8'));
    const onDisk = async (path: string) => ({ file: path.split('/').pop(), bytes: statSync(path).size, sha256: await sha256File(path), mtimeMs: statSync(path).mtimeMs });
    expect(record).toMatchObject({ graph: await onDisk(first.path), weights: await onDisk(first.path.replace(/\.onnx$/, '.weights')) });
  });

  it('rebuilds a copy whose weights were damaged', async () => {
    const cache = join(root, 'damaged');
    const first = await mappedGraph(source, cache, ALL);
    const weights = first.path.replace(/\.onnx$/, '.weights');
    writeFileSync(weights, readFileSync(weights).subarray(0, 1000));
    const again = await mappedGraph(source, cache, ALL);
    expect(again.built).toBe(true);
    expect(await outputsOf(again.path)).toEqual(await outputsOf(source));
  });

  it('gives a changed source a new copy', async () => {
    const dir = join(root, 'changing');
    mkdirSync(dir);
    const model = join(dir, 'model.onnx');
    cpSync(join(CONFORMANCE_DIR, 'bert-mean-embed', 'onnx', 'model.onnx'), model);
    const cache = join(root, 'changing-cache');
    const before = await mappedGraph(model, cache, ALL);
    cpSync(join(CONFORMANCE_DIR, 'bert-cls-embed', 'onnx', 'model.onnx'), model);
    const after = await mappedGraph(model, cache, ALL);
    expect(after.built).toBe(true);
    expect(after.path).not.toBe(before.path);
    expect(await outputsOf(after.path)).toEqual(await outputsOf(model));
  });

  it('returns the source for small graphs, graphs with external data and an unwritable cache', async () => {
    expect(await mappedGraph(source, join(root, 'small'))).toEqual({ path: source, mapped: false, built: false });

    const split = tinyGraph({ externalWeights: true });
    const dir = join(root, 'external');
    mkdirSync(dir);
    writeFileSync(join(dir, 'model.onnx'), split.onnx);
    writeFileSync(join(dir, 'model.onnx_data'), split.external ?? new Uint8Array());
    expect((await mappedGraph(join(dir, 'model.onnx'), join(root, 'external-cache'), ALL)).mapped).toBe(false);

    const locked = join(root, 'locked');
    mkdirSync(join(locked, 'mapped'), { recursive: true });
    chmodSync(join(locked, 'mapped'), 0o500);
    const errors: unknown[] = [];
    try {
      const result = await mappedGraph(source, locked, { ...ALL, onError: (error) => errors.push(error) });
      // root ignores permissions: then the copy is simply made.
      if (process.getuid?.() === 0) expect(result.mapped).toBe(true);
      else {
        expect(result).toEqual({ path: source, mapped: false, built: false });
        expect(errors).toHaveLength(1);
      }
    } finally {
      chmodSync(join(locked, 'mapped'), 0o700);
    }
  });

  it.runIf(process.platform === 'linux')('a cache folder under /proc (where Node 20 recursive mkdir spins forever) returns the source at once', async () => {
    const errors: unknown[] = [];
    const started = performance.now();
    const result = await mappedGraph(source, '/proc/shoal-no-such-cache', { ...ALL, onError: (error) => errors.push(error) });
    expect(result).toEqual({ path: source, mapped: false, built: false });
    expect(errors).toHaveLength(1);
    expect(performance.now() - started).toBeLessThan(2_000);
  });

  it('an unusable cache folder (a file in its place) returns the source and reports why', async () => {
    const cache = join(root, 'blocked');
    mkdirSync(cache);
    writeFileSync(join(cache, 'mapped'), 'not a folder');
    const errors: unknown[] = [];
    const result = await mappedGraph(source, cache, { ...ALL, onError: (error) => errors.push(error) });
    expect(result).toEqual({ path: source, mapped: false, built: false });
    expect(errors).toHaveLength(1);
  });
});

describe('through the engine', () => {
  it('loads a large graph from its mapped copy, and from the source with mappedWeights off, with the same vectors', async () => {
    const model = join(CONFORMANCE_DIR, 'bench-minilm-l6');
    const texts = ['mapped weights are loaded without copying', 'a second, somewhat longer sentence to embed'];
    const vectorsWith = async (mappedWeights: boolean): Promise<number[][]> => {
      const cacheDir = join(root, `engine-${String(mappedWeights)}`);
      const engine = new InferenceEngine({ runtime: { intraOpThreads: 1, cacheDir, mappedWeights } });
      try {
        const result = await engine.encode({ model, items: texts });
        return result.items.map((item) => Array.from(item.dense ?? []));
      } finally {
        await engine.close();
      }
    };
    const mapped = await vectorsWith(true);
    const plain = await vectorsWith(false);
    expect(readdirSync(mappedCacheDir(join(root, 'engine-true'))).filter((name) => name.endsWith('.weights'))).toHaveLength(1);
    expect(() => readdirSync(mappedCacheDir(join(root, 'engine-false')))).toThrow();
    expect(mapped[0]?.length).toBe(384);
    expect(mapped).toEqual(plain);
  }, 60_000);
});
