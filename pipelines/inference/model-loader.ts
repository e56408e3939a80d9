import { ErrorCode, ShoalError } from '../../adapters/protocol/errors.js';
import type { DownloadProgress } from '../../adapters/sources/hub-download.js';
import { resolveModelSource, type ResolveExtras, type SourceOptions } from '../../adapters/sources/resolve.js';
import type { ModelProfile, ProfileOverrides } from '../../adapters/models/profile.js';
import type { PrepPool } from '../../adapters/model-threads/prep-pool.js';
import type { Catalog } from './catalog.js';

/**
 * From a requested model name to a detected profile: catalog lookup, source resolution
 * (folder, models directory, hub cache or download), then detection in a prep thread.
 */

export interface ProfileResolverOptions {
  catalog: Catalog;
  sources: SourceOptions;
  prep: PrepPool;
  /** Serve models that are not in the catalog (by hub id or path). */
  allowUnlisted: boolean;
  /** Download progress of models fetched from the hub. */
  onDownloadProgress?: ((event: DownloadProgress) => void) | undefined;
}

export async function resolveProfile(name: string, options: ProfileResolverOptions): Promise<ModelProfile> {
  const entry = options.catalog.entries.get(name);
  if (entry === undefined && !options.allowUnlisted) {
    const known = [...options.catalog.entries.keys()];
    throw new ShoalError(
      ErrorCode.MODEL_NOT_FOUND,
      `model "${name}" is not in the catalog${known.length > 0 ? ` (known: ${known.slice(0, 20).join(', ')})` : ''}`,
    );
  }
  const { source, description: _description, ...overrides } = entry ?? {};
  const extras: ResolveExtras = overrides.precision === 'int8' || overrides.precision === 'q4' ? { precision: overrides.precision } : {};
  if (options.onDownloadProgress !== undefined) extras.onProgress = options.onDownloadProgress;
  const resolved = await resolveModelSource(source ?? name, options.sources, extras);
  const profileOverrides: ProfileOverrides = overrides;
  return options.prep.describe(name, resolved.dir, profileOverrides);
}
