import { cpSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveAuto } from '../../../../adapters/models/precision/precision.js';
import { nativeWeightFormat, quantizeToCache, readOnnx, sha256File } from '../../../../adapters/quantize/index.js';
import { DataType } from '../../../../adapters/quantize/onnx-file.js';
import { parseCatalog } from '../../../../pipelines/inference/catalog.js';
import { InferenceEngine } from '../../../../pipelines/inference/engine.js';
import { FIXTURES_DIR } from '../../../helpers/shared.js';

/**
 * Precision at load time through the engine (the model thread quantizes): int8 and auto on CPU
 * give a cached int8 graph, the fidelity gate refuses int8 when the floor cannot be met (warning
 * in the load info, fp32 outputs), the measured fidelity is reused by later loads, and a shipped
 * `_quantized` graph is used as is.
 */

const TINY = join(FIXTURES_DIR, 'models', 'tiny-bert-mean');
const TEXTS = ['a short sentence', 'another one, a little longer than the first'];
/** The fixture's two matrices are 8×8: quantize them anyway. */
const SMALL = { min_weight_elements: 0 };

let root: string;
let shipped: string;
const engines: InferenceEngine[] = [];

function engineWith(models: Record<string, unknown>, cacheDir = join(root, 'cache')): InferenceEngine {
  const engine = new InferenceEngine({ catalog: parseCatalog({ models }, 'precision test'), runtime: { intraOpThreads: 1, cacheDir } });
  engines.push(engine);
  return engine;
}

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), 'shoal-precision-'));
  // A model folder that ships its own int8 graph beside the float one, as Optimum/Xenova exports do.
  shipped = join(root, 'shipped');
  cpSync(TINY, shipped, { recursive: true });
  const int8 = await quantizeToCache({ source: join(TINY, 'onnx', 'model.onnx'), options: { minWeightElements: 0 }, cacheDir: join(root, 'side') });
  cpSync(int8.path, join(shipped, 'onnx', 'model_quantized.onnx'));
});

afterAll(async () => {
  for (const engine of engines) await engine.close();
  rmSync(root, { recursive: true, force: true });
});

describe('auto', () => {
  it('is int8 on CPU-only providers and fp32 as soon as a GPU provider is listed', () => {
    expect(resolveAuto(['cpu'])).toBe('int8');
    expect(resolveAuto(['cuda', 'cpu'])).toBe('fp32');
    expect(resolveAuto(['webgpu'])).toBe('fp32');
  });
});

describe('precision at load time', () => {
  it('int8 builds the quantized graph once; a second engine finds it cached with its fidelity', async () => {
    const first = engineWith({ tiny: { source: TINY, precision: 'int8', quantization: SMALL } });
    const { info } = await first.inspect('tiny');
    const precision = info.precision?.model;
    expect(precision).toMatchObject({ requested: 'int8', effective: 'int8', origin: 'quantized (built now)', rewritten: 2 });
    expect(precision?.graph.startsWith(join(root, 'cache', 'quantized'))).toBe(true);
    expect(precision?.fidelity?.floor).toBe(0.99);
    expect(precision?.fidelity?.minCosine).toBeGreaterThanOrEqual(0.99);
    expect(precision?.fidelity?.outputs.map((o) => o.name)).toEqual(['last_hidden_state']);

    const second = engineWith({ tiny: { source: TINY, precision: 'int8', quantization: SMALL } });
    const again = (await second.inspect('tiny')).info.precision?.model;
    expect(again).toMatchObject({ effective: 'int8', origin: 'quantized (cached)', graph: precision?.graph });
    expect(again?.fidelity).toEqual(precision?.fidelity);
  });

  it('auto on the CPU runs int8; its embeddings stay close to fp32', async () => {
    const engine = engineWith({
      auto: { source: TINY, precision: 'auto', quantization: SMALL },
      fp32: { source: TINY, precision: 'fp32' },
    });
    expect((await engine.inspect('auto')).info.precision?.model).toMatchObject({ requested: 'auto', effective: 'int8' });
    expect((await engine.inspect('fp32')).info.precision?.model).toMatchObject({ requested: 'fp32', effective: 'fp32', origin: 'float graph' });
    const [a, b] = await Promise.all([engine.encode({ model: 'auto', items: TEXTS }), engine.encode({ model: 'fp32', items: TEXTS })]);
    a.items.forEach((item, i) => {
      const left = item.dense ?? [];
      const right = b.items[i]?.dense ?? [];
      const cosine = left.reduce((sum, x, k) => sum + x * (right[k] ?? 0), 0); // both are unit vectors
      expect(cosine).toBeGreaterThan(0.99);
      expect(cosine).toBeLessThan(1); // and really different: the int8 graph ran
    });
  });

  it('quantization.weights picks how the int8 codes are stored (auto: by this CPU); anything else is refused', async () => {
    const engine = engineWith({
      signed: { source: TINY, precision: 'int8', quantization: { ...SMALL, weights: 'int8' } },
      unsigned: { source: TINY, precision: 'int8', quantization: { ...SMALL, weights: 'uint8' } },
      auto: { source: TINY, precision: 'int8', quantization: SMALL },
    });
    const storedAs = async (name: string): Promise<number[]> => {
      const precision = (await engine.inspect(name)).info.precision?.model;
      expect(precision?.effective).toBe('int8');
      const graph = (await readOnnx(precision?.graph ?? '')).model;
      return [...new Set(graph.graph?.initializer?.filter((t) => t.name?.endsWith('_int8')).map((t) => t.dataType ?? -1))];
    };
    // Asked for int8 storage on a CPU without VNNI, the saturating kernel may fail the fidelity
    // gate (then fp32 runs, as it should); the storage is checked where it is exact.
    if (nativeWeightFormat() === 'int8') expect(await storedAs('signed')).toEqual([DataType.INT8]);
    expect(await storedAs('unsigned')).toEqual([DataType.UINT8]);
    expect(await storedAs('auto')).toEqual([nativeWeightFormat() === 'int8' ? DataType.INT8 : DataType.UINT8]);
    expect(() => parseCatalog({ models: { bad: { source: TINY, quantization: { weights: 'int4' } } } }, 'precision test')).toThrow(/weights/);
  });

  it('the fidelity gate refuses int8 below the floor: fp32 runs, the load info says why', async () => {
    const engine = engineWith({
      strict: { source: TINY, precision: 'int8', quantization: { ...SMALL, min_cosine: 1.0000001 } },
      fp32: { source: TINY, precision: 'fp32' },
    });
    const precision = (await engine.inspect('strict')).info.precision?.model;
    expect(precision).toMatchObject({ requested: 'int8', effective: 'fp32', origin: 'float graph', graph: join(TINY, 'onnx', 'model.onnx') });
    expect(precision?.warning).toMatch(/int8 refused, running fp32: cosine\(fp32, int8\) of output "last_hidden_state" is 0\.9\d+, below the floor 1\.0000001/);
    expect(precision?.fidelity?.minCosine).toBeLessThan(1.0000001);
    const [a, b] = await Promise.all([engine.encode({ model: 'strict', items: TEXTS }), engine.encode({ model: 'fp32', items: TEXTS })]);
    expect(a.items.map((i) => i.dense)).toEqual(b.items.map((i) => i.dense));
  });

  it('int8 with no weight above the threshold keeps fp32 and says so', async () => {
    const engine = engineWith({ default: { source: TINY, precision: 'int8' } });
    const precision = (await engine.inspect('default')).info.precision?.model;
    expect(precision).toMatchObject({ effective: 'fp32', reason: 'no MatMul/Gemm weight of 16384 elements or more to quantize in model.onnx' });
  });

  it('an unwritable cache costs int8, not the model: fp32 runs with a warning', async () => {
    const blocker = join(root, 'not-a-folder');
    writeFileSync(blocker, 'a file where the cache folder should be');
    const engine = engineWith({ tiny: { source: TINY, precision: 'int8', quantization: SMALL } }, blocker);
    const precision = (await engine.inspect('tiny')).info.precision?.model;
    expect(precision).toMatchObject({ effective: 'fp32', reason: 'quantization failed' });
    expect(precision?.warning).toMatch(/^int8 refused, running fp32: cannot quantize model\.onnx \(cannot write .*SHOAL_CACHE_DIR/);
    expect((await engine.encode({ model: 'tiny', items: TEXTS })).items).toHaveLength(2);
  });

  it('a shipped int8 graph is used as is when int8 is asked for, never rewritten', async () => {
    const file = join(shipped, 'onnx', 'model_quantized.onnx');
    const before = await sha256File(file);
    const engine = engineWith({ shipped: { source: shipped, precision: 'int8' }, unset: { source: shipped }, float: { source: shipped, precision: 'fp32' } });
    const precision = (await engine.inspect('shipped')).info.precision?.model;
    expect(precision).toMatchObject({ effective: 'int8', origin: 'shipped int8 graph', graph: file });
    // No precision in the catalog: the shipped int8 export is used; `precision: fp32` keeps the float graph.
    expect((await engine.profile('unset')).onnx).toEqual({ model: 'onnx/model_quantized.onnx' });
    expect((await engine.inspect('unset')).info.precision?.model).toMatchObject({ effective: 'int8', origin: 'shipped int8 graph', graph: file });
    expect((await engine.profile('float')).onnx).toEqual({ model: 'onnx/model.onnx' });
    expect(await sha256File(file)).toBe(before);
  });
});
