import { realpath, stat } from 'node:fs/promises';
import { delimiter, join, resolve, sep } from 'node:path';
import { z } from 'zod';
import { ErrorCode, ShoalError } from '../protocol/errors.js';
import { parseWith } from '../protocol/validate.js';
import type { Precision } from './file-selection.js';
import { defaultHubCacheDir, findCachedSnapshot } from './hf-cache.js';
import { downloadModel, type DownloadProgress } from './hub-download.js';
import { parseModelRef, type ModelRef } from './model-ref.js';

/**
 * Turns a model reference into a local folder. Order for hub ids: the models directory
 * (SHOAL_MODEL_DIR, `org/name/` layout), then the hub cache, then a download from the hub
 * (when allowed). Local paths can be restricted to configured roots.
 */

export const SourceOptions = z.strictObject({
  /** Folders holding models as `org/name/` (or `name/`); SHOAL_MODEL_DIR, ':'-separated. */
  modelDirs: z.array(z.string()).default([]),
  /** Hub cache folder (HF_HUB_CACHE / HF_HOME/hub / ~/.cache/huggingface/hub). */
  hubCacheDir: z.string().optional(),
  /** Hub endpoint (HF_ENDPOINT). */
  hubEndpoint: z.string().url().default('https://huggingface.co'),
  /** Token for gated/private repositories (HF_TOKEN). */
  hubToken: z.string().optional(),
  /** Download missing models from the hub; false when HF_HUB_OFFLINE=1. */
  allowDownload: z.boolean().default(true),
  /** Accept local folder references (`/path`, `./path`). Services exposed to remote callers turn this off. */
  allowLocalPaths: z.boolean().default(true),
  /** When set, local folder references must lie inside one of these folders. */
  localRoots: z.array(z.string()).optional(),
});
export type SourceOptions = z.output<typeof SourceOptions>;
export type SourceOptionsInput = z.input<typeof SourceOptions>;

export function sourceOptionsFromEnv(env: NodeJS.ProcessEnv = process.env): SourceOptionsInput {
  const out: SourceOptionsInput = {};
  if (env.SHOAL_MODEL_DIR !== undefined && env.SHOAL_MODEL_DIR !== '') {
    out.modelDirs = env.SHOAL_MODEL_DIR.split(delimiter).filter((d) => d !== '');
  }
  out.hubCacheDir = defaultHubCacheDir(env);
  if (env.HF_ENDPOINT !== undefined && env.HF_ENDPOINT !== '') out.hubEndpoint = env.HF_ENDPOINT;
  if (env.HF_TOKEN !== undefined && env.HF_TOKEN !== '') out.hubToken = env.HF_TOKEN;
  if (env.HF_HUB_OFFLINE === '1' || env.SHOAL_OFFLINE === '1') out.allowDownload = false;
  return out;
}

export function resolveSourceOptions(input: SourceOptionsInput = {}): SourceOptions {
  return Object.freeze(parseWith(SourceOptions, input, 'model source options', ErrorCode.CONFIG_INVALID));
}

export interface ResolvedSource {
  dir: string;
  ref: ModelRef;
  origin: 'path' | 'models-dir' | 'hub-cache' | 'download';
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

function inside(root: string, path: string): boolean {
  const base = root.endsWith(sep) ? root : root + sep;
  return path === root || path.startsWith(base);
}

async function resolveLocal(ref: Extract<ModelRef, { kind: 'path' }>, options: SourceOptions): Promise<ResolvedSource> {
  if (!options.allowLocalPaths) {
    throw new ShoalError(ErrorCode.INVALID_INPUT, `local model paths are not allowed here ("${ref.raw}"); use a model id from the catalog or the hub`);
  }
  if (!(await isDirectory(ref.path))) {
    throw new ShoalError(ErrorCode.MODEL_NOT_FOUND, `model folder ${ref.path} does not exist`);
  }
  const real = await realpath(ref.path);
  if (options.localRoots !== undefined) {
    const roots = await Promise.all(options.localRoots.map(async (r) => realpath(resolve(r)).catch(() => resolve(r))));
    if (!roots.some((root) => inside(root, real))) {
      throw new ShoalError(ErrorCode.INVALID_INPUT, `model folder ${ref.path} is outside the allowed roots (${options.localRoots.join(', ')})`);
    }
  }
  return { dir: real, ref, origin: 'path' };
}

export async function resolveModelSource(raw: string, options: SourceOptions, extras: ResolveExtras = {}): Promise<ResolvedSource> {
  const ref = parseModelRef(raw);
  if (ref.kind === 'path') return resolveLocal(ref, options);
  if (ref.revision === null) {
    for (const root of options.modelDirs) {
      const dir = join(resolve(root), ...ref.repo.split('/'));
      if (await isDirectory(dir)) return { dir, ref, origin: 'models-dir' };
    }
  }
  const cacheDir = options.hubCacheDir ?? defaultHubCacheDir();
  const revision = ref.revision ?? 'main';
  const cached = await findCachedSnapshot(cacheDir, ref.repo, revision);
  if (cached !== null) return { dir: cached, ref, origin: 'hub-cache' };
  if (!options.allowDownload) {
    const dirs = options.modelDirs.length > 0 ? options.modelDirs.join(', ') : '(SHOAL_MODEL_DIR not set)';
    throw new ShoalError(
      ErrorCode.MODEL_NOT_FOUND,
      `model ${raw} not found in the models directory ${dirs} or the hub cache ${cacheDir}, and downloads are off`,
    );
  }
  const dir = await downloadModel(ref.repo, revision, {
    endpoint: options.hubEndpoint,
    token: options.hubToken,
    cacheDir,
    ...(extras.precision === undefined ? {} : { precision: extras.precision }),
    ...(extras.onProgress === undefined ? {} : { onProgress: extras.onProgress }),
  });
  return { dir, ref, origin: 'download' };
}
