import { z } from 'zod';
import { ErrorCode } from '../protocol/errors.js';
import { parseWith } from '../protocol/validate.js';
import { bucketProblem } from './uri.js';

/**
 * What an S3 client is built from. The services fill it from the standard AWS variables
 * (services/settings: AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL, AWS_REGION, AWS_ACCESS_KEY_ID...);
 * what is left out falls to the SDK's own defaults (its credential chain: profile, SSO, web
 * identity, container and instance metadata; its region chain). Credentials live only in this
 * object and the SDK client, and no log line or error message includes them.
 */

export const MIB = 1024 * 1024;
/** S3 refuses multipart parts under 5 MiB (all but the last). */
export const MIN_PART_BYTES = 5 * MIB;

const BucketName = z.string().refine((bucket) => bucketProblem(bucket) === null, { message: 'not a valid S3 bucket name' });

export const S3Settings = z.strictObject({
  /** A custom endpoint (MinIO, s3rver, a proxy): path-style addressing is used whenever it is set. */
  endpoint: z.url().max(2048).optional(),
  /** Region; unset: the SDK's region chain, or `us-east-1` when a custom endpoint is set (S3-compatible servers ignore it). */
  region: z.string().regex(/^[a-z0-9-]{1,64}$/, 'a region such as eu-west-1').optional(),
  /** Static credentials; unset: the SDK's default credential chain. */
  credentials: z
    .strictObject({
      accessKeyId: z.string().min(1).max(256),
      secretAccessKey: z.string().min(1).max(1024),
      sessionToken: z.string().min(1).max(8192).optional(),
    })
    .optional(),
  /** A profile of ~/.aws/config and ~/.aws/credentials for the SDK's chain. */
  profile: z.string().min(1).max(256).optional(),
  /** Attempts per request in the SDK's standard retry strategy (exponential backoff, full jitter). @default 5 */
  maxAttempts: z.number().int().min(1).max(20).default(5),
  /**
   * How long one operation (a put, a part, a listing page, a read) is retried by Shoal beyond the
   * SDK's attempts, with backoff and jitter, while the store answers with retryable failures
   * (down, throttling, 5xx): long enough to ride out a restart. @default 60000
   */
  operationRetryMs: z.number().int().min(0).max(3_600_000).default(60_000),
  /** Longest wait for a TCP connection. @default 5000 */
  connectTimeoutMs: z.number().int().min(100).max(600_000).default(5_000),
  /** Longest a request may stay silent (no bytes) before it fails and is retried. @default 60000 */
  requestTimeoutMs: z.number().int().min(100).max(3_600_000).default(60_000),
  /** Bodies larger than this go up in multipart uploads of parts this large. @default 8 MiB */
  partBytes: z.number().int().min(MIN_PART_BYTES).max(5 * 1024 * MIB).default(8 * MIB),
  /** Parts uploaded at once in a multipart upload. @default 4 */
  partConcurrency: z.number().int().min(1).max(64).default(4),
  /** Buckets job references and result targets may use; null = any bucket the credentials reach. @default null */
  allowedBuckets: z.array(BucketName).max(1000).nullable().default(null),
});
export type S3Settings = z.output<typeof S3Settings>;
export type S3SettingsInput = z.input<typeof S3Settings>;

export function resolveS3Settings(input: S3SettingsInput = {}): S3Settings {
  return Object.freeze(parseWith(S3Settings, input, 'S3 settings', ErrorCode.CONFIG_INVALID));
}
