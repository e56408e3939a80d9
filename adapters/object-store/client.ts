import type { S3Client, S3ClientConfig } from '@aws-sdk/client-s3';
import { s3Sdk } from './sdk.js';
import type { S3Settings } from './settings.js';

/**
 * The one place an S3 client is built. What the settings leave out is the SDK's default (its
 * credential and region chains). Fixed choices, each for a reason:
 * - a custom endpoint means path-style addressing (`http://host/bucket/key`): MinIO, s3rver and
 *   most S3-compatible servers have no per-bucket DNS names;
 * - checksums only WHEN_REQUIRED: the SDK's default (CRC32 trailers with aws-chunked framing on
 *   streamed uploads) is stored verbatim, framing included, by some S3-compatible servers, a
 *   silent corruption (../shared/PLATFORM.md);
 * - the standard retry mode (exponential backoff with full jitter, a retry quota) with
 *   `maxAttempts`, and bounded connect/idle timeouts so a dead server fails fast into a retry.
 */
export async function createS3Client(settings: S3Settings): Promise<S3Client> {
  const { S3Client } = await s3Sdk();
  const config: S3ClientConfig = {
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
    maxAttempts: settings.maxAttempts,
    retryMode: 'standard',
    // `socketTimeout` (no bytes for that long) is what fails a silent request: the handler's
    // `requestTimeout` only logs a warning to the console unless `throwOnRequestTimeout` is set,
    // and it would cap a whole download, however steadily its bytes arrive.
    requestHandler: { connectionTimeout: settings.connectTimeoutMs, socketTimeout: settings.requestTimeoutMs },
  };
  if (settings.endpoint !== undefined) {
    config.endpoint = settings.endpoint;
    config.forcePathStyle = true;
  }
  const region = settings.region ?? (settings.endpoint !== undefined ? 'us-east-1' : undefined);
  if (region !== undefined) config.region = region;
  if (settings.credentials !== undefined) config.credentials = { ...settings.credentials };
  else if (settings.profile !== undefined) config.profile = settings.profile;
  return new S3Client(config);
}
