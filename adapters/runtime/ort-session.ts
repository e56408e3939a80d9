import { availableParallelism, getPriority, homedir, setPriority } from 'node:os';
import { join } from 'node:path';
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

/** Shoal's cache folder when none is configured. */
export const DEFAULT_CACHE_DIR = join(homedir(), '.cache', 'shoal');

export const RuntimeOptions = z.strictObject({
  /** Providers in order of preference; CPU is always tried last unless `allowCpuFallback` is false. */
  providers: z.array(ExecutionProvider).min(1).default(['cpu']),
  allowCpuFallback: z.boolean().default(true),
  /** Threads one operator may use; default: all cores. */
  intraOpThreads: z.number().int().min(1).max(1024).optional(),
  interOpThreads: z.number().int().min(1).max(1024).optional(),
  graphOptimization: GraphOptimization.default('all'),
  /**
   * Keep ORT's CPU arena. Off by default: the arena keeps the largest batch's activations for
   * the session's lifetime, memory the pool's budget never sees (bench/soak.ts, 8 models all
   * resident: RSS 2,421 MB with it, 666 MB without, same requests per second; a single model's
   * bulk throughput is about 2 % lower without it). Turn it on for a worker that serves one model.
   */
  cpuMemArena: z.boolean().default(false),
  /** Let idle ORT threads spin: lower latency, but burns CPU other models could use. */
  spinning: z.boolean().default(false),
  /**
   * Nice value (0-19) of the thread creating the session; onnxruntime's intra-op threads inherit
   * it (Linux scheduling priority is per thread). Bulk sessions run at a higher nice value so a
   * query's session gets the cores first while both run. 0 = the process's own priority.
   */
  nice: z.number().int().min(0).max(19).default(0),
  /** Shoal's cache folder on this machine: int8 graphs (`quantized/`), batch-budget measurements (`tuning/`). Services set it from SHOAL_CACHE_DIR. */
  cacheDir: z.string().min(1).default(DEFAULT_CACHE_DIR),
  /**
   * Hand the memory released sessions freed back to the OS right away (glibc `malloc_trim`, through
   * the `native/` addon when it is built). Services turn it off with SHOAL_NATIVE_TRIM=0.
   */
  returnFreedMemory: z.boolean().default(true),
});
export type RuntimeOptions = z.output<typeof RuntimeOptions>;
export type RuntimeOptionsInput = z.input<typeof RuntimeOptions>;

/**
 * Per-model overrides of the engine's runtime options (catalog, profiles): every key optional and
 * WITHOUT defaults — `RuntimeOptions.partial()` keeps the inner defaults in zod 4, which would
 * silently replace the engine's own settings (providers, nice...) with the defaults.
 */
const runtimeShape = RuntimeOptions.shape;
export const RuntimeOverrides = z.strictObject({
  providers: runtimeShape.providers.unwrap().optional(),
  allowCpuFallback: runtimeShape.allowCpuFallback.unwrap().optional(),
  intraOpThreads: runtimeShape.intraOpThreads,
  interOpThreads: runtimeShape.interOpThreads,
  graphOptimization: runtimeShape.graphOptimization.unwrap().optional(),
  cpuMemArena: runtimeShape.cpuMemArena.unwrap().optional(),
  spinning: runtimeShape.spinning.unwrap().optional(),
  nice: runtimeShape.nice.unwrap().optional(),
});
export type RuntimeOverrides = z.infer<typeof RuntimeOverrides>;
/** Settings of the machine, not of a model: never overridden per model. */
type MachineWideKeys = 'cacheDir' | 'returnFreedMemory';
/** Fails to compile when RuntimeOptions gains a setting that cannot be overridden per model. */
type UncoveredRuntimeKeys = Exclude<keyof RuntimeOptions, keyof RuntimeOverrides | MachineWideKeys>;
const runtimeOverridesCoverAll: [UncoveredRuntimeKeys] extends [never] ? true : never = true;
void runtimeOverridesCoverAll;

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
