import { realpath, stat } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { z } from 'zod';
import { ErrorCode, ShoalError, toShoalError } from '../protocol/errors.js';
import { parseWith } from '../protocol/validate.js';
import type { Precision } from './file-selection.js';
import { builtinModelDir, builtinModelIds } from './builtin-models.js';
import { closeNames, missingModelDirs, modelsInDir } from './model-dirs.js';
import { DEFAULT_HUB_CACHE_DIR, inspectCachedSnapshot } from './hf-cache.js';
import { downloadModel, type DownloadProgress, type HubOptions } from './hub-download.js';
import { parseModelRef, type ModelRef } from './model-ref.js';
import { isInsideRoot } from './path-roots.js';

/**
 * Turns a model reference into a local folder. Order for hub ids: built-in models shipped in npm
 * packages (builtin-models.ts, ids without `@revision`), the models directories
 * (SHOAL_MODEL_DIR, `org/name/` layout; only for ids without `@revision`), then the hub cache,
 * then a download from the hub into the cache (when allowed). A cached snapshot is used without
 * asking the hub whether the branch moved: pin a commit, or delete `refs/<branch>`, to update.
 * Local paths can be switched off or restricted to configured roots.
 */

export const SourceOptions = z.strictObject({
  /** Folders holding models as `org/name/` (or `name/`); SHOAL_MODEL_DIR, ':'-separated. */
  modelDirs: z.array(z.string()).default([]),
  /** Hub cache folder; services read HF_HUB_CACHE / HF_HOME (services/settings). @default ~/.cache/huggingface/hub */
  hubCacheDir: z.string().optional(),
  /** Hub endpoint (HF_ENDPOINT). */
  hubEndpoint: z.url({ protocol: /^https?$/, error: 'hubEndpoint must be an http(s) URL' }).default('https://huggingface.co'),
  /** Token for gated/private repositories (HF_TOKEN). */
  hubToken: z.string().optional(),
  /** Download missing models from the hub; false when HF_HUB_OFFLINE or SHOAL_OFFLINE is set to 1/true/yes/on. */
  allowDownload: z.boolean().default(true),
  /** Attempts per hub request; interrupted transfers resume where they stopped. */
  downloadAttempts: z.number().int().min(1).max(20).default(4),
  /** A hub request fails when no data arrived for this long (milliseconds; HF_HUB_DOWNLOAD_TIMEOUT in seconds). */
  downloadIdleTimeoutMs: z
    .number({ error: 'downloadIdleTimeoutMs (HF_HUB_DOWNLOAD_TIMEOUT) must be a number' })
    .int()
    .min(100, 'downloadIdleTimeoutMs must be at least 100 ms (HF_HUB_DOWNLOAD_TIMEOUT at least 0.1 s)')
    .default(60_000),
  /** Accept local folder references (`/path`, `./path`). Services exposed to remote callers turn this off. */
  allowLocalPaths: z.boolean().default(true),
  /** When set, local folder references must lie inside one of these folders. */
  localRoots: z.array(z.string()).optional(),
});
export type SourceOptions = z.output<typeof SourceOptions>;
export type SourceOptionsInput = z.input<typeof SourceOptions>;

export function resolveSourceOptions(input: SourceOptionsInput = {}): SourceOptions {
  return Object.freeze(parseWith(SourceOptions, input, 'model source options', ErrorCode.CONFIG_INVALID));
}

export interface ResolvedSource {
  dir: string;
  ref: ModelRef;
  origin: 'path' | 'builtin' | 'models-dir' | 'hub-cache' | 'download';
}

export interface ResolveExtras {
  precision?: Precision;
  onProgress?: (event: DownloadProgress) => void;
}

async function isDirectory(path: string): Promise<boolean> {
  try {
    return (await stat(path)).isDirectory();
  } catch {
    return false;
  }
}

async function resolveLocal(ref: Extract<ModelRef, { kind: 'path' }>, options: SourceOptions): Promise<ResolvedSource> {
  if (!options.allowLocalPaths) {
    throw new ShoalError(ErrorCode.INVALID_INPUT, `local model paths are not allowed here ("${ref.raw}"); use a model id from the catalog or the hub`);
  }
  const roots = options.localRoots?.map((root) => resolve(root));
  const outside = (): ShoalError =>
    new ShoalError(ErrorCode.INVALID_INPUT, `model folder ${ref.path} is outside the allowed roots (${(roots ?? []).join(', ')})`);
  // Checked on the path as written first, so a caller cannot probe what exists outside the roots.
  if (roots !== undefined && !roots.some((root) => isInsideRoot(root, ref.path))) throw outside();
  if (!(await isDirectory(ref.path))) {
    throw new ShoalError(ErrorCode.MODEL_NOT_FOUND, `model folder ${ref.path} does not exist (or is not a folder)`);
  }
  const real = await realpath(ref.path);
  if (roots !== undefined) {
    // ...and again once symlinks are resolved: a link inside a root may point anywhere.
    const realRoots = await Promise.all(roots.map(async (root) => realpath(root).catch(() => root)));
    if (!realRoots.some((root) => isInsideRoot(root, real))) throw outside();
  }
  return { dir: real, ref, origin: 'path' };
}

async function findInModelDirs(repo: string, modelDirs: readonly string[]): Promise<string | null> {
  for (const root of modelDirs) {
    const dir = join(resolve(root), ...repo.split('/'));
    if (await isDirectory(dir)) return dir;
  }
  return null;
}

/** What the models directories say about an id they do not hold: missing folders and close names. */
interface LocalMiss {
  /** A sentence for the error message. */
  note: string;
  close: string[];
  missing: string[];
}

async function localMiss(repo: string, modelDirs: readonly string[]): Promise<LocalMiss> {
  const missing = await missingModelDirs(modelDirs);
  const present = modelDirs.filter((dir) => !missing.includes(dir));
  const known = [...builtinModelIds()];
  for (const dir of present) known.push(...(await modelsInDir(resolve(dir))));
  const close = closeNames(repo, known);
  const parts: string[] = [];
  parts.push(modelDirs.length > 0 ? `not found in the models directories (${modelDirs.join(', ')})` : 'not found locally (no models directory is set: SHOAL_MODEL_DIR / --model-dir)');
  if (missing.length > 0) parts.push(`models directory ${missing.join(', ')} does not exist`);
  if (close.length > 0) parts.push(`close names: ${close.join(', ')}`);
  return { note: parts.join('; '), close, missing };
}

function notFoundOffline(raw: string, revision: string | null, options: SourceOptions, cacheDir: string, partial: string | null, miss: LocalMiss | null): ShoalError {
  const places: string[] = [];
  if (revision !== null) places.push('the models directories are only searched for ids without @revision');
  else places.push(options.modelDirs.length > 0 ? `models directories ${options.modelDirs.join(', ')}` : 'no models directory (SHOAL_MODEL_DIR is not set)');
  places.push(partial === null ? `hub cache ${cacheDir}` : `hub cache ${cacheDir} (snapshot ${partial} exists but holds no ONNX graph: its download did not finish)`);
  const hints = [miss !== null && miss.missing.length > 0 ? `models directory ${miss.missing.join(', ')} does not exist` : '', miss !== null && miss.close.length > 0 ? `close names: ${miss.close.join(', ')}` : '']
    .filter((hint) => hint !== '')
    .map((hint) => `; ${hint}`)
    .join('');
  return new ShoalError(
    ErrorCode.MODEL_NOT_FOUND,
    `model ${raw} was not found; looked in: ${places.join('; ')}${hints}. Downloads are off (HF_HUB_OFFLINE / SHOAL_OFFLINE): ` +
      'put the model in a models directory, or fetch it once with downloads on',
    { details: { model: raw, modelDirs: options.modelDirs, hubCacheDir: cacheDir, ...(miss === null ? {} : { closeNames: miss.close }) } },
  );
}

export async function resolveModelSource(raw: string, options: SourceOptions, extras: ResolveExtras = {}): Promise<ResolvedSource> {
  const ref = parseModelRef(raw);
  if (ref.kind === 'path') return resolveLocal(ref, options);
  let miss: LocalMiss | null = null;
  if (ref.revision === null) {
    const builtin = builtinModelDir(ref.repo);
    if (builtin !== null) return { dir: builtin, ref, origin: 'builtin' };
    const dir = await findInModelDirs(ref.repo, options.modelDirs);
    if (dir !== null) return { dir, ref, origin: 'models-dir' };
    miss = await localMiss(ref.repo, options.modelDirs);
  }
  const cacheDir = options.hubCacheDir ?? DEFAULT_HUB_CACHE_DIR;
  const revision = ref.revision ?? 'main';
  const cached = await inspectCachedSnapshot(cacheDir, ref.repo, revision);
  if (cached?.usable === true) return { dir: cached.dir, ref, origin: 'hub-cache' };
  if (!options.allowDownload) throw notFoundOffline(raw, ref.revision, options, cacheDir, cached?.dir ?? null, miss);
  // A bare name (no org/) next to a local model of a similar name, or while a models directory
  // is missing, is a local name, not a hub id: say so now rather than after the hub's retries
  // (hub ids are org/name, bar a few legacy ones).
  if (miss !== null && !ref.repo.includes('/') && (miss.close.length > 0 || miss.missing.length > 0)) {
    throw new ShoalError(ErrorCode.MODEL_NOT_FOUND, `model ${raw} was ${miss.note}`, {
      details: { model: raw, modelDirs: options.modelDirs, closeNames: miss.close },
    });
  }
  const hub: HubOptions = {
    endpoint: options.hubEndpoint,
    token: options.hubToken,
    cacheDir,
    attempts: options.downloadAttempts,
    idleTimeoutMs: options.downloadIdleTimeoutMs,
  };
  if (extras.precision !== undefined) hub.precision = extras.precision;
  if (extras.onProgress !== undefined) hub.onProgress = extras.onProgress;
  let dir: string;
  try {
    dir = await downloadModel(ref.repo, revision, hub);
  } catch (error) {
    if (miss === null) throw error;
    // The hub's failure alone reads like an outage: say first that the local places were searched.
    const shoal = toShoalError(error);
    throw new ShoalError(shoal.code, `model ${raw} was ${miss.note}; then the hub: ${shoal.message}`, {
      cause: shoal.cause ?? shoal,
      details: { ...shoal.details, closeNames: miss.close },
    });
  }
  return { dir, ref, origin: 'download' };
}
