import { ShoalSettings } from '../settings/shoal-settings.js';
import { z } from 'zod';
import { ErrorCode, ShoalError } from '../../adapters/protocol/errors.js';
import { DEFAULT_SCHEDULER_OPTIONS } from '../../pipelines/inference/scheduler-options.js';
import { BATCH_TOKENS_VALUES, EngineSettings, engineSettingsFromEnv, MAX_BATCH_TOKENS, MAX_THREADS } from '../settings/engine-settings.js';
import { splitDirs, splitList } from '../settings/environment.js';
import { PositiveIntFlag, WholeNumberFlag } from '../settings/flag-values.js';
import { SETTINGS } from '../settings/table.js';

/**
 * The CLI's global configuration: flags over environment variables (services/settings) over
 * defaults, validated once with zod and frozen. Commands receive this object and never read
 * `process.env` themselves. The engine part is the same `EngineSettings` the worker uses, so
 * SHOAL_MEMORY_BUDGET or SHOAL_IMAGE_ROOTS mean the same for `shoal encode` and `shoal worker`.
 */

/** @default lines handed to the engine per call: bounds memory, keeps batches full. */
export const DEFAULT_CHUNK_LINES = SETTINGS.chunkLines.default;
/** Padded tokens (longest × items) per model batch when neither flag nor env sets it: the engine's own default. */
export const DEFAULT_BATCH_TOKENS = DEFAULT_SCHEDULER_OPTIONS.maxBatchTokens;

export const ProgressMode = z.enum(['auto', 'always', 'never']);
export type ProgressMode = z.infer<typeof ProgressMode>;

/** What commander hands over: every global flag as the raw string the user typed (or absent). */
export interface GlobalFlags {
  catalog?: string | undefined;
  modelDir?: string | undefined;
  threads?: string | undefined;
  providers?: string | undefined;
  batchTokens?: string | undefined;
  memoryBudget?: string | undefined;
  chunkLines?: string | undefined;
  /** commander gives true for --progress, false for --no-progress, undefined when neither. */
  progress?: boolean | undefined;
  quiet?: boolean | undefined;
}

/** The flags' own strings, checked before they join the environment's values; keys name the flags. */
const FlagStrings = z.strictObject({
  threads: PositiveIntFlag(MAX_THREADS).optional(),
  'batch-tokens': z.union([z.literal('auto'), WholeNumberFlag(1, MAX_BATCH_TOKENS, BATCH_TOKENS_VALUES)], { error: BATCH_TOKENS_VALUES }).optional(),
  'chunk-lines': PositiveIntFlag(100_000).optional(),
});

/** Setting key (settings/table.ts) behind each engine field and CLI flag, for messages. */
const SETTING_OF_FIELD: ReadonlyMap<string, keyof typeof SETTINGS> = new Map([
  ['catalog', 'catalog'],
  ['modelDirs', 'modelDir'],
  ['threads', 'threads'],
  ['providers', 'providers'],
  ['batchTokens', 'batchTokens'],
  ['memoryBudget', 'memoryBudget'],
  ['imageRoots', 'imageRoots'],
  ['imageHosts', 'imageHosts'],
  ['cpuArena', 'cpuArena'],
  ['chunk-lines', 'chunkLines'],
  ['batch-tokens', 'batchTokens'],
]);

export interface CliConfig {
  /** Catalog, model folders, threads, providers, batch tokens, memory budget, image roots and hosts. */
  readonly engine: EngineSettings;
  /** Input lines per engine call (--chunk-lines, SHOAL_CHUNK_LINES). */
  readonly chunkLines: number;
  readonly progress: ProgressMode;
  /** Nothing on stderr but errors. */
  readonly quiet: boolean;
}

/** `--threads (or SHOAL_THREADS)`: where the user sets the value a message is about. */
function describe(key: string): string {
  const setting = SETTING_OF_FIELD.get(key);
  if (setting === undefined) return key;
  const spec = SETTINGS[setting];
  return 'flag' in spec ? `${spec.flag} (or ${spec.env.join(', ')})` : spec.env.join(', ');
}

function invalid(issues: readonly z.core.$ZodIssue[]): ShoalError {
  const problems = issues.map((issue) => `${describe(String(issue.path[0] ?? ''))}: ${issue.message}`);
  return new ShoalError(ErrorCode.CONFIG_INVALID, `invalid configuration: ${problems.join('; ')}`);
}

/** Flags win over the environment; an empty environment variable counts as unset. */
export function resolveCliConfig(flags: GlobalFlags, from: ShoalSettings | NodeJS.ProcessEnv): CliConfig {
  const settings = ShoalSettings.from(from);
  const checked = FlagStrings.safeParse({
    threads: flags.threads,
    'batch-tokens': flags.batchTokens,
    'chunk-lines': flags.chunkLines ?? settings.value('chunkLines'),
  });
  if (!checked.success) throw invalid(checked.error.issues);
  const fromFlags: Record<string, unknown> = {
    catalog: flags.catalog,
    modelDirs: splitDirs(flags.modelDir),
    threads: checked.data.threads,
    providers: splitList(flags.providers),
    batchTokens: checked.data['batch-tokens'],
    memoryBudget: flags.memoryBudget,
  };
  const merged: Record<string, unknown> = { ...engineSettingsFromEnv(settings.variables) };
  for (const [key, value] of Object.entries(fromFlags)) if (value !== undefined) merged[key] = value;
  const engine = EngineSettings.safeParse(merged);
  if (!engine.success) throw invalid(engine.error.issues);
  return Object.freeze({
    engine: Object.freeze(engine.data),
    chunkLines: checked.data['chunk-lines'] ?? DEFAULT_CHUNK_LINES,
    progress: flags.progress === undefined ? 'auto' : flags.progress ? 'always' : 'never',
    quiet: flags.quiet === true,
  });
}
