import { describe, expect, it } from 'vitest';
import { isMissing, resolveS3Settings, toS3Error } from '../../../../adapters/object-store/index.js';
import { ErrorCode } from '../../../../adapters/protocol/errors.js';
import { readConfigFile } from '../../../../services/settings/config-file.js';
import { s3SettingsFromEnv } from '../../../../services/settings/environment.js';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** SDK failures as Shoal codes, and the AWS variables as S3 settings. */

function sdkError(name: string, status?: number, extra: Record<string, unknown> = {}): Error {
  return Object.assign(new Error(`${name} happened`), { name, ...(status === undefined ? {} : { $metadata: { httpStatusCode: status } }), ...extra });
}

describe('S3 errors', () => {
  it.each([
    [sdkError('NoSuchKey', 404), ErrorCode.NOT_FOUND],
    [sdkError('NoSuchBucket', 404), ErrorCode.NOT_FOUND],
    [sdkError('AccessDenied', 403), ErrorCode.CONFIG_INVALID],
    [sdkError('InvalidAccessKeyId', 403), ErrorCode.CONFIG_INVALID],
    [sdkError('SlowDown', 503), ErrorCode.UNAVAILABLE],
    [sdkError('InternalError', 500), ErrorCode.UNAVAILABLE],
    [sdkError('TooManyRequests', 429), ErrorCode.UNAVAILABLE],
    [sdkError('Error', undefined, { code: 'ECONNREFUSED' }), ErrorCode.UNAVAILABLE],
    [sdkError('TimeoutError'), ErrorCode.UNAVAILABLE],
    [sdkError('AbortError'), ErrorCode.CANCELLED],
    [sdkError('InvalidArgument', 400), ErrorCode.INVALID_INPUT],
    [new Error('Region is missing'), ErrorCode.CONFIG_INVALID],
  ])('%s → %s', (error, code) => {
    const shoal = toS3Error(error, 'read s3://b/k');
    expect(shoal.code).toBe(code);
    expect(shoal.message).toMatch(/^read s3:\/\/b\/k/);
  });

  it('knows a missing object in both forms', () => {
    expect(isMissing(sdkError('NoSuchKey', 404))).toBe(true);
    expect(isMissing(toS3Error(sdkError('NotFound', 404), 'x'))).toBe(true);
    expect(isMissing(sdkError('SlowDown', 503))).toBe(false);
  });
});

describe('S3 settings from the environment', () => {
  it('reads the standard AWS variables, endpoint first as AWS_ENDPOINT_URL_S3', () => {
    const settings = s3SettingsFromEnv({
      AWS_ENDPOINT_URL: 'http://generic:9000',
      AWS_ENDPOINT_URL_S3: 'http://minio:9000',
      AWS_REGION: 'eu-west-1',
      AWS_ACCESS_KEY_ID: 'AKIDEXAMPLE',
      AWS_SECRET_ACCESS_KEY: 'secret-example',
      AWS_SESSION_TOKEN: 'token-example',
      AWS_MAX_ATTEMPTS: '7',
      SHOAL_S3_BUCKETS: 'docs, results',
    });
    expect(resolveS3Settings(settings)).toMatchObject({
      endpoint: 'http://minio:9000',
      region: 'eu-west-1',
      credentials: { accessKeyId: 'AKIDEXAMPLE', secretAccessKey: 'secret-example', sessionToken: 'token-example' },
      maxAttempts: 7,
      allowedBuckets: ['docs', 'results'],
    });
  });

  it('leaves credentials to the SDK chain unless both key id and secret are set, and takes a profile', () => {
    expect(s3SettingsFromEnv({ AWS_ACCESS_KEY_ID: 'AKIDEXAMPLE' }).credentials).toBeUndefined();
    expect(s3SettingsFromEnv({ AWS_PROFILE: 'shoal' })).toEqual({ profile: 'shoal' });
    expect(s3SettingsFromEnv({})).toEqual({});
  });

  it('refuses bad values as CONFIG_INVALID without echoing a secret', () => {
    const bad = (): unknown => resolveS3Settings(s3SettingsFromEnv({ AWS_ENDPOINT_URL_S3: 'not a url', AWS_ACCESS_KEY_ID: 'AKID', AWS_SECRET_ACCESS_KEY: 'super-secret' }));
    expect(bad).toThrow(expect.objectContaining({ code: ErrorCode.CONFIG_INVALID }));
    try {
      bad();
    } catch (error) {
      expect(String(error)).not.toContain('super-secret');
    }
    expect(() => resolveS3Settings({ allowedBuckets: ['Not_A_Bucket'] })).toThrow(expect.objectContaining({ code: ErrorCode.CONFIG_INVALID }));
  });

  it('takes the credentials from a settings file too', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'shoal-s3-config-'));
    try {
      const file = join(dir, 'shoal.yaml');
      await writeFile(file, 'AWS_ACCESS_KEY_ID: AKIDFILE\nAWS_SECRET_ACCESS_KEY: from-file\ns3Endpoint: http://127.0.0.1:9000\ns3Buckets: [a-bucket, b-bucket]\n');
      expect(s3SettingsFromEnv(readConfigFile(file))).toMatchObject({
        endpoint: 'http://127.0.0.1:9000',
        credentials: { accessKeyId: 'AKIDFILE', secretAccessKey: 'from-file' },
        allowedBuckets: ['a-bucket', 'b-bucket'],
      });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
