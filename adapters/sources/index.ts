export { parseModelRef, cacheFolderName } from './model-ref.js';
export type { ModelRef } from './model-ref.js';
export { defaultHubCacheDir, findCachedSnapshot, repoCacheDir, isCommitHash } from './hf-cache.js';
export { downloadModel, fetchRepoInfo } from './hub-download.js';
export type { DownloadProgress, HubOptions } from './hub-download.js';
export { pickOnnxFiles, externalDataFiles, selectDownloadFiles, isMetadataFile } from './file-selection.js';
export type { Precision, RepoFile } from './file-selection.js';
export { SourceOptions, resolveModelSource, resolveSourceOptions, sourceOptionsFromEnv } from './resolve.js';
export type { ResolvedSource, ResolveExtras, SourceOptionsInput } from './resolve.js';
