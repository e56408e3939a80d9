import { homedir } from 'node:os';
import { join } from 'node:path';
import { z } from 'zod';

/**
 * The settings of onnxruntime sessions (providers, threads, arena, nice, cache folder) as plain
 * zod schemas, apart from ort-session.ts so that the main thread, which parses and passes them on
 * but never creates a session, does not load onnxruntime's native library (about 80 ms of every
 * `shoal` command's start-up).
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
  /**
   * Load large self-contained graphs from a copy whose weights onnxruntime maps from disk instead
   * of copying (adapters/quantize/mapped-graph.ts: a session of all-MiniLM-L6-v2 is created in a
   * third of the time). The copy is kept under `cacheDir/mapped/`. Services turn it off with SHOAL_MAPPED_WEIGHTS=0.
   */
  mappedWeights: z.boolean().default(true),
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
type MachineWideKeys = 'cacheDir' | 'returnFreedMemory' | 'mappedWeights';
/** Fails to compile when RuntimeOptions gains a setting that cannot be overridden per model. */
type UncoveredRuntimeKeys = Exclude<keyof RuntimeOptions, keyof RuntimeOverrides | MachineWideKeys>;
const runtimeOverridesCoverAll: [UncoveredRuntimeKeys] extends [never] ? true : never = true;
void runtimeOverridesCoverAll;

export function resolveRuntimeOptions(input: RuntimeOptionsInput = {}): RuntimeOptions {
  return Object.freeze(RuntimeOptions.parse(input));
}
