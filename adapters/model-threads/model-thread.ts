import { join } from 'node:path';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { ErrorCode, ShoalError } from '../protocol/errors.js';
import { returnFreedMemory } from '../runtime/native-memory.js';
import type { RuntimeOptions } from '../runtime/runtime-options.js';
import { serveThread, type HandlerResult } from '../support/thread-rpc.js';
import type { ItemOutput, Runner } from '../models/family.js';
import type { GraphRewrite } from '../quantize/derived-graph.js';
import { openWithPrecision } from '../models/precision/precision.js';
import type { PrecisionInfo } from '../models/precision/precision-info.js';
import type { ModelProfile } from '../models/profile.js';
import { measureBudgets, type TuningPoint } from './batch-tuning.js';
import { loadFamily } from '../models/family-loaders.js';
import { similarity } from './similarity.js';
import type { ModelRequest, ModelResponse } from './thread-messages.js';

/**
 * Model thread: owns one model's ONNX session(s) and runs its family's Runner. session.run blocks
 * the thread it is called on, which is why this is never the main thread.
 */

/**
 * A full garbage collection, when V8 lets us have one. A released model's last tensors are
 * external ArrayBuffers that V8 frees only when it collects; this thread is reused for the next
 * model (ModelThreads), so waiting for V8 to get round to it would keep that memory resident.
 */
const collectGarbage: (() => void) | null = (() => {
  try {
    setFlagsFromString('--expose-gc');
    const gc: unknown = runInNewContext('gc');
    return typeof gc === 'function' ? () => void gc() : null;
  } catch {
    return null;
  }
})();

let runner: Runner | null = null;
/** What the runner was created from, to recreate it after tuning. */
let loaded: { profile: ModelProfile; runtime: RuntimeOptions } | null = null;

async function createRunner(profile: ModelProfile, runtime: RuntimeOptions, precision: Record<string, PrecisionInfo>): Promise<Runner> {
  return (await loadFamily(profile.family)).createRunner({ profile, runtime, openSession: openSessionFor(profile, runtime, precision) });
}

/** Opens a component's session in the profile's precision, recording what was chosen in `precision`. */
function openSessionFor(profile: ModelProfile, runtime: RuntimeOptions, precision: Record<string, PrecisionInfo>) {
  return async (component: string, rewrite?: GraphRewrite<unknown>) => {
    const file = profile.onnx[component];
    if (file === undefined) {
      throw new ShoalError(
        ErrorCode.MODEL_LOAD_FAILED,
        `${profile.id}: no ONNX graph for component "${component}" (have: ${Object.keys(profile.onnx).join(', ')})`,
      );
    }
    const options = { ...runtime, ...profile.runtime };
    let path = join(profile.dir, file);
    if (rewrite !== undefined) {
      // Imported by the threads of families that rewrite their graph only (it pulls in the protobuf code to build).
      const { derivedGraph } = await import('../quantize/derived-graph.js');
      try {
        path = (await derivedGraph(path, options.cacheDir, rewrite)).path;
      } catch (error) {
        if (rewrite.optional !== true) throw error;
        process.stderr.write(`shoal: ${profile.id}: ${rewrite.version} not applied, loading ${file} as it is: ${error instanceof Error ? error.message : String(error)}\n`);
      }
    }
    const opened = await openWithPrecision(profile, path, options);
    precision[component] = opened.precision;
    return opened.created;
  };
}

/**
 * The buffers of the dense vectors, moved to the main thread instead of copied. Only a vector
 * that owns its whole buffer is moved: a view into a shared tensor would detach its neighbours.
 */
function vectorBuffers(outputs: readonly ItemOutput[]): ArrayBuffer[] {
  const buffers = new Set<ArrayBuffer>();
  for (const { dense } of outputs) {
    if (dense === undefined || !(dense.buffer instanceof ArrayBuffer)) continue;
    if (dense.byteOffset === 0 && dense.byteLength === dense.buffer.byteLength) buffers.add(dense.buffer);
  }
  return [...buffers];
}

async function handle(message: ModelRequest): Promise<HandlerResult<ModelResponse>> {
  switch (message.type) {
    case 'load': {
      if (runner !== null) throw new ShoalError(ErrorCode.INTERNAL, 'model thread already holds a model');
      const started = performance.now();
      const precision: Record<string, PrecisionInfo> = {};
      runner = await createRunner(message.profile, message.runtime, precision);
      loaded = { profile: message.profile, runtime: message.runtime };
      return { body: { type: 'loaded', info: { ...runner.info, precision }, loadMs: performance.now() - started } };
    }
    case 'run': {
      if (runner === null) throw new ShoalError(ErrorCode.INTERNAL, 'model thread has no model loaded');
      const started = performance.now();
      let outputs = await runner.run(message.batch, message.options);
      const reference = message.compareTo;
      if (reference !== undefined) outputs = outputs.map((output) => ({ score: similarity(output, reference) }));
      return { body: { type: 'ran', outputs, runMs: performance.now() - started }, transfer: vectorBuffers(outputs) };
    }
    case 'ping':
      return { body: { type: 'pong' } };
    case 'tune': {
      if (runner === null || loaded === null) throw new ShoalError(ErrorCode.INTERNAL, 'model thread has no model loaded');
      const points: TuningPoint[] = [];
      for (const length of message.lengths) {
        for (const point of await measureBudgets(runner, loaded.profile, message.budgets, length, message.rounds)) points.push({ ...point, length });
      }
      // The session's memory arena now holds what the largest trial batch needed; a fresh session
      // only grows to the budget actually chosen.
      const tuned = runner;
      runner = null;
      await tuned.release();
      if (loaded.runtime.returnFreedMemory) returnFreedMemory();
      runner = await createRunner(loaded.profile, loaded.runtime, {});
      return { body: { type: 'tuned', points } };
    }
    case 'release': {
      const current = runner;
      const trim = loaded?.runtime.returnFreedMemory ?? true;
      runner = null;
      if (current !== null) await current.release();
      loaded = null;
      collectGarbage?.();
      // What the sessions freed goes back to the OS now, not whenever glibc's heuristics decide.
      if (trim) returnFreedMemory();
      return { body: { type: 'released' } };
    }
    default:
      throw new ShoalError(ErrorCode.INTERNAL, 'unknown model request');
  }
}

serveThread<ModelRequest, ModelResponse>(handle);
