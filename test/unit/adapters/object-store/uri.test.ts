import { describe, expect, it } from 'vitest';
import { backoffDelay, joinKey, parseS3Uri } from '../../../../adapters/object-store/index.js';
import { ErrorCode } from '../../../../adapters/protocol/errors.js';

describe('s3:// URIs', () => {
  it('splits bucket and key, the key taken literally', () => {
    expect(parseS3Uri('s3://my-bucket/docs/a b/%20.pdf')).toEqual({ bucket: 'my-bucket', key: 'docs/a b/%20.pdf' });
    expect(parseS3Uri('s3://my.bucket')).toEqual({ bucket: 'my.bucket', key: '' });
    expect(parseS3Uri('s3://b12/prefix/')).toEqual({ bucket: 'b12', key: 'prefix/' });
  });

  it.each([
    ['http://b/k', 'does not start with s3://'],
    ['s3://ab/k', '3 to 63'],
    ['s3://Bucket/k', 'lowercase'],
    ['s3://-bucket/k', 'lowercase'],
    ['s3://a..b/k', '".."'],
    ['s3://192.168.1.1/k', 'IP address'],
    ['s3://xn--abc/k', 'reserved'],
    [`s3://${'b'.repeat(64)}/k`, '3 to 63'],
    ['s3://bucket/../etc/passwd', '".."'],
    ['s3://bucket/a/./b', '"."'],
    ['s3://bucket//abs', 'starts with "/"'],
    ['s3://bucket/a?versionId=1', '"?"'],
    ['s3://bucket/a\u0001b', 'control characters'],
    [`s3://bucket/${'k'.repeat(1025)}`, '1024 bytes'],
    [`s3://bucket/${'k'.repeat(2100)}`, 'longer than 2048'],
  ])('refuses %s (%s)', (uri, why) => {
    expect(() => parseS3Uri(uri)).toThrow(expect.objectContaining({ code: ErrorCode.INVALID_INPUT, message: expect.stringContaining(why) }));
  });

  it('joins prefixes and relative keys without doubled slashes, and checks the result', () => {
    expect(joinKey('', 'job/part-0.jsonl')).toBe('job/part-0.jsonl');
    expect(joinKey('results/', 'job/part-0.jsonl')).toBe('results/job/part-0.jsonl');
    expect(joinKey('results', '/job')).toBe('results/job');
    expect(() => joinKey('results', '../x')).toThrow(/"\.\."/);
  });
});

describe('retry backoff', () => {
  it('doubles up to the cap, with half of each delay random', () => {
    expect(backoffDelay(0, 250, 5000, () => 0)).toBe(125);
    expect(backoffDelay(0, 250, 5000, () => 1)).toBe(250);
    expect(backoffDelay(3, 250, 5000, () => 0.5)).toBe(1500);
    expect(backoffDelay(10, 250, 5000, () => 1)).toBe(5000);
    expect(backoffDelay(10, 250, 5000, () => 0)).toBe(2500);
  });
});
