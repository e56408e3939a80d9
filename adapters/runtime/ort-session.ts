import { availableParallelism } from 'node:os';
import * as ort from 'onnxruntime-node';
import { z } from 'zod';
import { ErrorCode, ShoalError } from '../protocol/errors.js';

/**
 * onnxruntime-node sessions with explicit provider fallback. ORT does not fall back by itself
 * (`['cuda','cpu']` throws when CUDA is missing), so each provider is tried in order and the
 * reasons for skipping one are kept, to be reported by `models inspect` and in load logs.
 * Only ever called inside a worker thread: `session.run` blocks the thread it runs on.
 */

export const ExecutionProvider = z.enum(['cpu', 'cuda', 'webgpu', 'tensorrt', 'dml', 'coreml']);
export type ExecutionProvider = z.infer<typeof ExecutionProvider>;

export const GraphOptimization = z.enum(['disabled', 'basic', 'extended', 'all']);
export type GraphOptimization = z.infer<typeof GraphOptimization>;

export const RuntimeOptions = z.strictObject({
  /** Providers in order of preference; CPU is always tried last unless `allowCpuFallback` is false. */
  providers: z.array(ExecutionProvider).min(1).default(['cpu']),
  allowCpuFallback: z.boolean().default(true),
  /** Threads one operator may use; default: all cores. */
  intraOpThreads: z.number().int().min(1).max(1024).optional(),
  interOpThreads: z.number().int().min(1).max(1024).optional(),
  graphOptimization: GraphOptimization.default('all'),
  /** Keep ORT's CPU arena: faster repeated runs, but memory is not returned between batches. */
  cpuMemArena: z.boolean().default(true),
  /** Let idle ORT threads spin: lower latency, but burns CPU other models could use. */
  spinning: z.boolean().default(false),
});
export type RuntimeOptions = z.output<typeof RuntimeOptions>;
export type RuntimeOptionsInput = z.input<typeof RuntimeOptions>;

export function resolveRuntimeOptions(input: RuntimeOptionsInput = {}): RuntimeOptions {
  return Object.freeze(RuntimeOptions.parse(input));
}

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

export async function createSession(file: string | Uint8Array, options: RuntimeOptions): Promise<CreatedSession> {
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
