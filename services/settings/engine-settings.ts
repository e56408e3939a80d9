
import { ShoalSettings } from './shoal-settings.js';
import { z } from 'zod';
import { ErrorCode } from '../../adapters/protocol/errors.js';
import { parseWith } from '../../adapters/protocol/validate.js';
import { ExecutionProvider } from '../../adapters/runtime/runtime-options.js';
import type { EngineOptionsInput } from '../../pipelines/inference/engine-options.js';
import { mappedWeightsFromEnv, nativeTrimFromEnv, shoalCacheDirFromEnv, sourceOptionsFromEnv, splitDirs, splitList } from './environment.js';
import { WholeNumberValue } from './flag-values.js';
import { envValue, SETTINGS } from './table.js';

/**
 * The engine settings every command that runs models shares — the in-process CLI commands,
 * `shoal worker` and `shoal dev` alike — read from the same variables with the same defaults,
 * so a variable that works for the worker works for `shoal encode` too.
 */

/** Most onnxruntime intra-op threads per model (--threads, SHOAL_THREADS). */
export const MAX_THREADS = 1024;
/** Largest padded-token budget of a batch (--batch-tokens, SHOAL_BATCH_TOKENS). */
export const MAX_BATCH_TOKENS = 1 << 24;
/** What --batch-tokens / SHOAL_BATCH_TOKENS take, said for any other value (zod's own is "Invalid input"). */
export const BATCH_TOKENS_VALUES = `must be auto or a whole number from 1 to ${MAX_BATCH_TOKENS}`;

export const EngineSettings = z.strictObject({
  /** Catalog file or folder; null = models by id or path only. */
  catalog: z.string().min(1).nullable().default(null),
  /** Folders holding models as `org/name/`. */
  modelDirs: z.array(z.string().min(1)).default([]),
  /** ORT intra-op threads per model; null = all cores. */
  threads: WholeNumberValue(1, MAX_THREADS).nullable().default(null),
  providers: z.array(ExecutionProvider).min(1).default([SETTINGS.providers.default]),
  /** Padded tokens per batch, or 'auto' (measured per model on this machine); null = the engine's default. */
  batchTokens: z.union([WholeNumberValue(1, MAX_BATCH_TOKENS, BATCH_TOKENS_VALUES), z.literal('auto')], { error: BATCH_TOKENS_VALUES }).nullable().default(null),
  /** Folders image items may name by path (SHOAL_IMAGE_ROOTS); empty = images travel as bytes/base64 only. */
  imageRoots: z.array(z.string().min(1)).default([]),
  /** Hosts image URLs may be fetched from (SHOAL_IMAGE_HOSTS, exact or *.example.com); empty = none. */
  imageHosts: z.array(z.string().min(1)).default([]),
  /** Memory for models: bytes, "2GiB", "60%"; default: the engine's (half the RAM). */
  memoryBudget: z.union([z.number().int().positive(), z.string().min(1)]).optional(),
  /**
   * onnxruntime's CPU arena (SHOAL_CPU_ARENA); null = the command's default: on for the one-shot
   * CLI commands (one process, one job, then exit: the arena's memory is given back at exit, and
   * without it every large batch maps fresh pages, up to a third slower at 2,048-token batches,
   * bench/throughput.ts), off for long-running workers, where it would keep each resident model's
   * largest batch out of the memory budget (adapters/runtime/ort-session.ts).
   */
  cpuArena: z.boolean({ error: 'must be 1, on, true or yes (on), or 0, off, false or no (off)' }).nullable().default(null),
});
export type EngineSettings = z.output<typeof EngineSettings>;

/** A whole number from the environment; anything else is passed through for zod to name. */
export function wholeNumber(value: string | undefined): number | string | undefined {
  if (value === undefined) return undefined;
  return /^\d+$/.test(value) ? Number(value) : value;
}

/** `1`/`on`/`true` and `0`/`off`/`false` as booleans; anything else is passed through for zod to name. */
function onOff(value: string | undefined): boolean | string | undefined {
  if (value === undefined) return undefined;
  const v = value.trim().toLowerCase();
  if (['1', 'on', 'true', 'yes'].includes(v)) return true;
  if (['0', 'off', 'false', 'no'].includes(v)) return false;
  return value;
}

/** Partial input with only what the environment sets (zod reports bad values by field). */
export function engineSettingsFromEnv(env: NodeJS.ProcessEnv): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const put = (key: string, value: unknown): void => {
    if (value !== undefined) out[key] = value;
  };
  put('catalog', envValue(env, 'catalog'));
  put('modelDirs', splitDirs(envValue(env, 'modelDir')));
  put('threads', wholeNumber(envValue(env, 'threads')));
  put('providers', splitList(envValue(env, 'providers')));
  const batchTokens = envValue(env, 'batchTokens');
  put('batchTokens', batchTokens === 'auto' ? 'auto' : wholeNumber(batchTokens));
  put('imageRoots', splitDirs(envValue(env, 'imageRoots')));
  put('imageHosts', splitList(envValue(env, 'imageHosts')));
  put('memoryBudget', envValue(env, 'memoryBudget'));
  put('cpuArena', onOff(envValue(env, 'cpuArena')));
  return out;
}

/**
 * The in-process engine's options from these settings. `env` supplies the model sources (hub
 * cache, token, offline switch); the catalog file is loaded by the caller.
 */
export function engineOptionsFromSettings(settings: EngineSettings, from: ShoalSettings | NodeJS.ProcessEnv): Omit<EngineOptionsInput, 'catalog'> {
  const env = ShoalSettings.from(from).variables;
  return {
    sources: { ...sourceOptionsFromEnv(env), modelDirs: [...settings.modelDirs] },
    runtime: {
      providers: [...settings.providers],
      ...(settings.threads === null ? {} : { intraOpThreads: settings.threads }),
      cacheDir: shoalCacheDirFromEnv(env),
      returnFreedMemory: nativeTrimFromEnv(env),
      mappedWeights: mappedWeightsFromEnv(env),
      ...(settings.cpuArena === null ? {} : { cpuMemArena: settings.cpuArena }),
    },
    ...(settings.batchTokens === null ? {} : { maxBatchTokens: settings.batchTokens }),
    ...(settings.memoryBudget === undefined ? {} : { memoryBudget: settings.memoryBudget }),
    images: { roots: [...settings.imageRoots], allowedHosts: [...settings.imageHosts] },
  };
}

/**
 * Engine options from the environment alone, the way `shoal encode` reads it: for programs that
 * embed the engine and want SHOAL_* / HF_* variables honoured
 * (`new InferenceEngine(engineOptionsFromEnv(process.env))`).
 */
export function engineOptionsFromEnv(env: NodeJS.ProcessEnv): Omit<EngineOptionsInput, 'catalog'> {
  return engineOptionsFromSettings(parseWith(EngineSettings, engineSettingsFromEnv(env), 'engine settings from the environment', ErrorCode.CONFIG_INVALID), env);
}
