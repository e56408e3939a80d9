import { basename } from 'node:path';
import type { QuantizedGraph } from '../../quantize/index.js';
import { mappedGraph } from '../../quantize/mapped-graph.js';
import { createSession, type CreatedSession } from '../../runtime/ort-session.js';
import type { RuntimeOptions } from '../../runtime/runtime-options.js';
import { calibrationBatch } from './calibration.js';
import { CALIBRATION_VERSION } from './calibration.js';
import { measureFidelity } from './fidelity.js';
import type { ModelProfile } from '../profile.js';
import type { EffectivePrecision, PrecisionInfo } from './precision-info.js';

/**
 * Opens a component's ONNX session in the precision its profile asks for. Runs in the model
 * thread: building an int8 graph (seconds for a large model) and the fidelity check never block
 * the main thread.
 *
 * - `fp32`: the graph as detected.
 * - `int8`: a shipped int8 graph (detect.ts picks `_quantized`/`_int8` files) is used as is; a
 *   float graph is quantized (once: the result is cached on disk, see adapters/quantize).
 * - `auto`: int8 when every execution provider is the CPU (DynamicQuantizeMatMul is a CPU
 *   kernel; on a GPU it would only move work back to the CPU), else fp32. `auto` starts from the
 *   float graph: shipped int8 files are only chosen for an explicit `int8`.
 *
 * The fidelity gate: the first time an int8 graph is used, a calibration batch runs through the
 * float and the int8 graph; if any float output's cosine falls below the profile's floor
 * (`quantization.min_cosine`, default 0.99) the model runs fp32 and a warning says why. The
 * measurement is stored with the cached graph, so later loads only compare it with the floor.
 */

export interface OpenedSession {
  created: CreatedSession;
  precision: PrecisionInfo;
}

/** What `auto` resolves to for these providers. */
export function resolveAuto(providers: readonly string[]): EffectivePrecision {
  return providers.length > 0 && providers.every((provider) => provider === 'cpu') ? 'int8' : 'fp32';
}

function warn(profile: ModelProfile, message: string): string {
  const line = `shoal: ${profile.id}: ${message}`;
  process.stderr.write(`${line}\n`);
  return message;
}

/**
 * A session of `file`, created from its mapped copy (adapters/quantize/mapped-graph.ts) when the
 * runtime asks for it. The copy has the same graph and weights; if a session cannot be created
 * from it (a file system that cannot map, say), the source is loaded instead.
 */
async function openGraph(profile: ModelProfile, file: string, runtime: RuntimeOptions): Promise<CreatedSession> {
  if (!runtime.mappedWeights) return createSession(file, runtime);
  const unmapped = (error: unknown): void => {
    warn(profile, `loading ${basename(file)} without mapped weights: ${error instanceof Error ? error.message : String(error)}`);
  };
  const copy = await mappedGraph(file, runtime.cacheDir, { onError: unmapped });
  if (!copy.mapped) return createSession(file, runtime);
  try {
    return await createSession(copy.path, runtime);
  } catch (error) {
    unmapped(error);
    return createSession(file, runtime);
  }
}

function fidelityInfo(graph: QuantizedGraph, floor: number): PrecisionInfo['fidelity'] {
  const measured = graph.record.fidelity;
  return measured === null ? undefined : { floor, minCosine: measured.minCosine, outputs: measured.outputs };
}

/** Measures fidelity (fp32 vs int8 on the calibration batch) and stores it with the cached graph. */
async function checkFidelity(profile: ModelProfile, file: string, graph: QuantizedGraph, runtime: RuntimeOptions): Promise<{ graph: QuantizedGraph; candidate: CreatedSession | null }> {
  // The float reference runs once per int8 graph: loaded as it is, not copied for mapping.
  const reference = await createSession(file, runtime);
  let candidate: CreatedSession | null = null;
  try {
    candidate = await openGraph(profile, graph.path, runtime);
    const batch = calibrationBatch(profile, reference.session.inputNames, graph.record.inputVocab);
    const fidelity = await measureFidelity(reference.session, candidate.session, batch, profile.id);
    const { saveFidelity } = await import('../../quantize/quantized-cache.js');
    return { graph: await saveFidelity(graph, fidelity), candidate };
  } catch (error) {
    if (candidate !== null) await candidate.session.release();
    throw error;
  } finally {
    await reference.session.release();
  }
}

async function openInt8(profile: ModelProfile, file: string, runtime: RuntimeOptions, requested: PrecisionInfo['requested']): Promise<OpenedSession> {
  const started = performance.now();
  const floor = profile.quantization.minCosine;
  const fp32 = async (reason: string, extra: Partial<PrecisionInfo> = {}): Promise<OpenedSession> => ({
    created: await openGraph(profile, file, runtime),
    precision: { requested, effective: 'fp32', graph: file, origin: 'float graph', reason, ...extra },
  });
  let graph: QuantizedGraph;
  try {
    // Imported here, by threads that open an int8 model, and only the cache side: the cache imports
    // the protobuf and graph-rewriting code itself when it has to build a graph.
    const [{ quantizeToCache }, { quantizedCacheDir }, { nativeWeightFormat }] = await Promise.all([
      import('../../quantize/quantized-cache.js'),
      import('../../quantize/cache-files.js'),
      import('../../quantize/cpu-features.js'),
    ]);
    graph = await quantizeToCache({ source: file, cacheDir: quantizedCacheDir(runtime.cacheDir), options: {
      minWeightElements: profile.quantization.minWeightElements,
      weights: profile.quantization.weights === 'auto' ? nativeWeightFormat() : profile.quantization.weights,
      mergeProjections: profile.quantization.mergeProjections,
      fuseAttention: profile.quantization.fuseAttention,
    } });
  } catch (error) {
    // An unwritable cache or an unreadable graph must not stop the model from serving in fp32.
    const message = warn(profile, `int8 refused, running fp32: cannot quantize ${basename(file)} (${error instanceof Error ? error.message : String(error)})`);
    return fp32('quantization failed', { warning: message });
  }
  const record = graph.record;
  if (record.output === null) {
    if (record.alreadyQuantized) {
      return { created: await openGraph(profile, file, runtime), precision: { requested, effective: 'int8', graph: file, origin: 'shipped int8 graph' } };
    }
    const reason = `no MatMul/Gemm weight of ${profile.quantization.minWeightElements} elements or more to quantize in ${basename(file)}`;
    return fp32(reason);
  }
  const common: Partial<PrecisionInfo> = { bytes: { source: graph.sourceBytes, quantized: graph.outputBytes }, rewritten: record.report.matmul + record.report.gemm };
  let candidate: CreatedSession | null = null;
  if (record.fidelity === null || record.fidelity.calibration !== CALIBRATION_VERSION) {
    try {
      ({ graph, candidate } = await checkFidelity(profile, file, graph, runtime));
    } catch (error) {
      const message = warn(profile, `int8 refused, running fp32: the fidelity check could not run (${error instanceof Error ? error.message : String(error)})`);
      return fp32('fidelity check failed to run', { ...common, warning: message });
    }
  }
  const fidelity = fidelityInfo(graph, floor);
  const minCosine = graph.record.fidelity?.minCosine ?? 0;
  if (minCosine < floor) {
    if (candidate !== null) await candidate.session.release();
    const worst = graph.record.fidelity?.outputs.find((o) => o.cosine === minCosine)?.name ?? '?';
    const message = warn(profile, `int8 refused, running fp32: cosine(fp32, int8) of output "${worst}" is ${minCosine.toFixed(5)}, below the floor ${floor} (quantization.min_cosine in the catalog)`);
    return fp32(`fidelity ${minCosine.toFixed(5)} below floor ${floor}`, { ...common, warning: message, ...(fidelity === undefined ? {} : { fidelity }) });
  }
  const created = candidate ?? (await openGraph(profile, graph.path, runtime));
  const precision: PrecisionInfo = {
    requested,
    effective: 'int8',
    graph: graph.path,
    origin: graph.built ? 'quantized (built now)' : 'quantized (cached)',
    ...common,
    ...(fidelity === undefined ? {} : { fidelity }),
    quantizeMs: Math.round(performance.now() - started),
  };
  return { created, precision };
}

/** File names Optimum/Xenova (and `shoal models quantize --out`) give int8 graphs. */
const INT8_FILE = /_(quantized|int8|uint8|qint8|quint8)\.onnx$/i;

/** File names transformers.js gives its 4-bit graphs (MatMulNBits weights). */
const Q4_FILE = /_(q4|q4f16|bnb4)\.onnx$/i;

/** The session for one ONNX file of `profile`, in the precision the profile resolves to. */
export async function openWithPrecision(profile: ModelProfile, file: string, runtime: RuntimeOptions): Promise<OpenedSession> {
  const requested = profile.precision;
  if (Q4_FILE.test(file)) {
    // A 4-bit graph runs as shipped: Shoal does not quantize to 4 bits itself, nor re-quantize one.
    const reason = requested === 'q4' ? undefined : `${basename(file)} is a 4-bit export the folder ships (precision: fp32 in the catalog picks the float graph when there is one)`;
    return { created: await openGraph(profile, file, runtime), precision: { requested, effective: 'q4', graph: file, origin: 'shipped 4-bit graph', ...(reason === undefined ? {} : { reason }) } };
  }
  if (requested === 'q4') {
    return {
      created: await openGraph(profile, file, runtime),
      precision: { requested, effective: 'fp32', graph: file, origin: 'float graph', reason: `no 4-bit graph (model_q4.onnx) in the folder: ${basename(file)} runs as it is` },
    };
  }
  if (requested !== 'int8' && INT8_FILE.test(file)) {
    // The graph chosen for this component is an int8 export (a folder shipping no float graph, or
    // a catalog naming it): it runs as int8 whatever was asked, and the load info says so.
    const reason = `${basename(file)} is an int8 export the folder ships (precision: fp32 in the catalog picks the float graph when there is one)`;
    return { created: await openGraph(profile, file, runtime), precision: { requested, effective: 'int8', graph: file, origin: 'shipped int8 graph', reason } };
  }
  if (requested === 'fp32') {
    return { created: await openGraph(profile, file, runtime), precision: { requested, effective: 'fp32', graph: file, origin: 'float graph' } };
  }
  if (requested === 'auto' && resolveAuto(runtime.providers) === 'fp32') {
    return {
      created: await openGraph(profile, file, runtime),
      precision: { requested, effective: 'fp32', graph: file, origin: 'float graph', reason: `auto: providers ${runtime.providers.join(',')} are not CPU-only` },
    };
  }
  return openInt8(profile, file, runtime, requested);
}
