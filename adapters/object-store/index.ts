/** The object-store adapter's public surface: S3 (and S3-compatible servers) behind S3Store. */
export { S3Store, type CallOptions, type S3StoreOptions } from './store.js';
export { S3Settings, resolveS3Settings, MIB, MIN_PART_BYTES, type S3SettingsInput } from './settings.js';
export { parseS3Uri, formatS3Uri, joinKey, folderPrefix, bucketProblem, keyProblem, type S3Location } from './uri.js';
export { createS3Client } from './client.js';
export { toS3Error, isMissing } from './errors.js';
export { withRetry, backoffDelay, type RetryEvent, type RetryOptions } from './retry.js';
export type { ListedObject } from './list.js';
export type { WriteResult } from './write.js';
