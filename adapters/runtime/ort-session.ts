import { availableParallelism, getPriority, setPriority } from 'node:os';
import * as ort from 'onnxruntime-node';
import { ErrorCode, ShoalError } from '../protocol/errors.js';
import type { ExecutionProvider, RuntimeOptions } from './runtime-options.js';

/**
 * onnxruntime-node sessions with explicit provider fallback. ORT does not fall back by itself
 * (`['cuda','cpu']` throws when CUDA is missing), so each provider is tried in order and the
 * reasons for skipping one are kept, to be reported by `models inspect` and in load logs.
 * Only ever called inside a worker thread: `session.run` blocks the thread it runs on.
 */

export interface CreatedSession {
  session: ort.InferenceSession;
  provider: ExecutionProvider;
  /** Providers tried before the one that worked, with the error each gave. */
  skipped: { provider: ExecutionProvider; reason: string }[];
}

function sessionOptions(provider: ExecutionProvider, options: RuntimeOptions): ort.InferenceSession.SessionOptions {
  return {
    executionProviders: [provider],
    intraOpNumThreads: options.intraOpThreads ?? availableParallelism(),
    interOpNumThreads: options.interOpThreads ?? 1,
    graphOptimizationLevel: options.graphOptimization,
    enableCpuMemArena: options.cpuMemArena,
    enableMemPattern: true,
    executionMode: 'sequential',
    logSeverityLevel: 3,
    extra: { session: { intra_op: { allow_spinning: options.spinning ? '1' : '0' } } },
  };
}

function providerOrder(options: RuntimeOptions): ExecutionProvider[] {
  const order = [...new Set(options.providers)];
  if (options.allowCpuFallback && !order.includes('cpu')) order.push('cpu');
  return order;
}

/** Lowers this thread's scheduling priority (never raises it: that needs privileges). */
export function applyThreadNice(nice: number): void {
  if (nice <= 0) return;
  try {
    // pid 0 = the calling thread on Linux; threads it creates afterwards inherit the value.
    if (getPriority(0) < nice) setPriority(0, nice);
  } catch {
    // Platforms without per-thread priorities: run at the process's priority.
  }
}

export async function createSession(file: string | Uint8Array, options: RuntimeOptions): Promise<CreatedSession> {
  applyThreadNice(options.nice);
  const skipped: { provider: ExecutionProvider; reason: string }[] = [];
  for (const provider of providerOrder(options)) {
    try {
      const session =
        typeof file === 'string'
          ? await ort.InferenceSession.create(file, sessionOptions(provider, options))
          : await ort.InferenceSession.create(file, sessionOptions(provider, options));
      return { session, provider, skipped };
    } catch (error) {
      skipped.push({ provider, reason: error instanceof Error ? error.message : String(error) });
    }
  }
  const what = typeof file === 'string' ? file : 'in-memory graph';
  const reasons = skipped.map((s) => `${s.provider}: ${s.reason}`).join('; ');
  throw new ShoalError(ErrorCode.MODEL_LOAD_FAILED, `cannot create an onnxruntime session for ${what}: ${reasons}`, {
    details: { skipped },
  });
}

export interface IoInfo {
  name: string;
  type: string;
  shape: (number | string)[];
}

export function describeInputs(session: ort.InferenceSession): IoInfo[] {
  return session.inputMetadata.map((meta) =>
    meta.isTensor ? { name: meta.name, type: meta.type, shape: [...meta.shape] } : { name: meta.name, type: 'non-tensor', shape: [] },
  );
}

export function describeOutputs(session: ort.InferenceSession): IoInfo[] {
  return session.outputMetadata.map((meta) =>
    meta.isTensor ? { name: meta.name, type: meta.type, shape: [...meta.shape] } : { name: meta.name, type: 'non-tensor', shape: [] },
  );
}

export { ort };
