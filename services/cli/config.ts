import { delimiter } from 'node:path';
import { z } from 'zod';
import { ErrorCode, ShoalError } from '../../adapters/protocol/errors.js';
import { ExecutionProvider } from '../../adapters/runtime/ort-session.js';
import { DEFAULT_SCHEDULER_OPTIONS } from '../../pipelines/inference/scheduler.js';

/**
 * The CLI's global configuration: flags over environment variables over defaults, validated once
 * with zod and frozen. Commands receive this object and never read `process.env` themselves.
 */

/** @default lines handed to the engine per call: bounds memory, keeps batches full. */
export const DEFAULT_CHUNK_LINES = 256;
/** Padded tokens (longest × items) per model batch when neither flag nor env sets it: the engine's own default. */
export const DEFAULT_BATCH_TOKENS = DEFAULT_SCHEDULER_OPTIONS.maxBatchTokens;
export const DEFAULT_PROVIDERS: readonly ExecutionProvider[] = Object.freeze(['cpu']);

export const ProgressMode = z.enum(['auto', 'always', 'never']);
export type ProgressMode = z.infer<typeof ProgressMode>;

/** What commander hands over: every global flag as the raw string the user typed (or absent). */
export interface GlobalFlags {
  catalog?: string | undefined;
  modelDir?: string | undefined;
  threads?: string | undefined;
  providers?: string | undefined;
  batchTokens?: string | undefined;
  chunkLines?: string | undefined;
  /** commander gives true for --progress, false for --no-progress, undefined when neither. */
  progress?: boolean | undefined;
  quiet?: boolean | undefined;
}

const PositiveInt = (max: number) =>
  z
    .string()
    .trim()
    .regex(/^\d+$/, 'must be a whole number')
    .transform(Number)
    .pipe(z.number().int().min(1).max(max));

const CommaList = z
  .string()
  .transform((value) => value.split(',').map((part) => part.trim()).filter((part) => part !== ''));

/** Keys are named after the flags, so a message like `threads: ...` points at `--threads`. */
const RawConfig = z.strictObject({
  catalog: z.string().trim().min(1, 'must not be empty').optional(),
  'model-dir': z.string().optional(),
  threads: PositiveInt(1024).optional(),
  providers: CommaList.pipe(z.array(ExecutionProvider).min(1, 'name at least one provider')).optional(),
  'batch-tokens': z.union([z.literal('auto'), PositiveInt(1 << 24)]).optional(),
  'chunk-lines': PositiveInt(100_000).optional(),
  progress: ProgressMode,
  quiet: z.boolean(),
});

/** The environment variable behind each flag, for messages. */
const ENV_NAMES: ReadonlyMap<string, string> = new Map([
  ['catalog', 'SHOAL_CATALOG'],
  ['model-dir', 'SHOAL_MODEL_DIR'],
  ['threads', 'SHOAL_THREADS'],
  ['providers', 'SHOAL_PROVIDERS'],
  ['batch-tokens', 'SHOAL_BATCH_TOKENS'],
  ['chunk-lines', 'SHOAL_CHUNK_LINES'],
]);

export interface CliConfig {
  /** Catalog file or folder (--catalog, SHOAL_CATALOG); null: no catalog, models by id or path only. */
  readonly catalog: string | null;
  /** Folders holding models as `org/name/` (--model-dir, SHOAL_MODEL_DIR; ':'-separated). */
  readonly modelDirs: readonly string[];
  /** ORT intra-op threads per model (--threads, SHOAL_THREADS); null: all cores. */
  readonly threads: number | null;
  /** Execution providers in order of preference (--providers, SHOAL_PROVIDERS); CPU is the fallback. */
  readonly providers: readonly ExecutionProvider[];
  /** Padded tokens per model batch (--batch-tokens, SHOAL_BATCH_TOKENS); null: the engine's default. */
  readonly batchTokens: number | 'auto' | null;
  /** Input lines per engine call (--chunk-lines, SHOAL_CHUNK_LINES). */
  readonly chunkLines: number;
  readonly progress: ProgressMode;
  /** Nothing on stderr but errors. */
  readonly quiet: boolean;
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value.trim() === '' ? undefined : value;
}

/** Flags win over the environment; an empty environment variable counts as unset. */
export function resolveCliConfig(flags: GlobalFlags, env: NodeJS.ProcessEnv = process.env): CliConfig {
  const raw = {
    catalog: flags.catalog ?? nonEmpty(env.SHOAL_CATALOG),
    'model-dir': flags.modelDir ?? nonEmpty(env.SHOAL_MODEL_DIR),
    threads: flags.threads ?? nonEmpty(env.SHOAL_THREADS),
    providers: flags.providers ?? nonEmpty(env.SHOAL_PROVIDERS),
    'batch-tokens': flags.batchTokens ?? nonEmpty(env.SHOAL_BATCH_TOKENS),
    'chunk-lines': flags.chunkLines ?? nonEmpty(env.SHOAL_CHUNK_LINES),
    progress: flags.progress === undefined ? 'auto' : flags.progress ? 'always' : 'never',
    quiet: flags.quiet === true,
  };
  const result = RawConfig.safeParse(raw);
  if (!result.success) {
    const problems = result.error.issues.map((issue) => {
      const key = String(issue.path[0] ?? '');
      const env = ENV_NAMES.get(key);
      const where = env === undefined ? key : `--${key} (or ${env})`;
      return `${where}: ${issue.message}`;
    });
    throw new ShoalError(ErrorCode.CONFIG_INVALID, `invalid configuration: ${problems.join('; ')}`);
  }
  const parsed = result.data;
  return Object.freeze({
    catalog: parsed.catalog ?? null,
    modelDirs: Object.freeze((parsed['model-dir'] ?? '').split(delimiter).filter((dir) => dir !== '')),
    threads: parsed.threads ?? null,
    providers: Object.freeze(parsed.providers ?? [...DEFAULT_PROVIDERS]),
    batchTokens: parsed['batch-tokens'] ?? null,
    chunkLines: parsed['chunk-lines'] ?? DEFAULT_CHUNK_LINES,
    progress: parsed.progress,
    quiet: parsed.quiet,
  });
}
