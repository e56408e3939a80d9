import { describe, expect, it } from 'vitest';
import { checkSameJob, jobContentHash } from '../../../../adapters/nats/jobs/job-identity.js';
import { initialStatus } from '../../../../adapters/nats/jobs/status-store.js';
import { hasErrorCode } from '../../../../adapters/protocol/errors.js';
import { checkRemoteModelName } from '../../../../adapters/protocol/model-names.js';

/** What makes two submissions the same job, and which model names may cross the network. */

describe('jobContentHash', () => {
  const base = { primitive: 'encode' as const, request: { model: 'm', items: [{ text: 'a' }, { text: 'b' }], normalize: true }, result: { kind: 'stream' as const }, partItems: 64 };

  it('ignores key order and undefined fields, and sees every difference that matters', () => {
    const hash = jobContentHash(base);
    expect(hash).toMatch(/^[0-9a-f]{64}$/);
    expect(jobContentHash({ ...base, request: { normalize: true, items: [{ text: 'a' }, { text: 'b' }], model: 'm', prompt: undefined } })).toBe(hash);
    expect(jobContentHash({ ...base, request: { ...base.request, items: [{ text: 'b' }, { text: 'a' }] } })).not.toBe(hash);
    expect(jobContentHash({ ...base, request: { ...base.request, normalize: false } })).not.toBe(hash);
    expect(jobContentHash({ ...base, partItems: 32 })).not.toBe(hash);
    expect(jobContentHash({ ...base, result: { kind: 'stream', vectors: 'json' } })).not.toBe(hash);
    expect(jobContentHash({ ...base, primitive: 'extract' })).not.toBe(hash);
  });

  it('checkSameJob passes the same content and refuses other content with JOB_CONFLICT', () => {
    const contentHash = jobContentHash(base);
    const status = initialStatus({ job_id: 'j', primitive: 'encode', model: 'm', parts: 1, result: { kind: 'stream' } }, 2, new Date(0), { contentHash, deadlineAt: new Date(1) });
    expect(() => checkSameJob(status, { primitive: 'encode', model: 'm', parts: 1, items: 2, contentHash })).not.toThrow();
    const other = (() => {
      try {
        checkSameJob(status, { primitive: 'encode', model: 'm', parts: 1, items: 2, contentHash: 'f'.repeat(64) });
        return null;
      } catch (error) {
        return error;
      }
    })();
    expect(hasErrorCode(other, 'JOB_CONFLICT')).toBe(true);
    // A status without a hash (recreated from a part) is compared by shape.
    const { content_hash: _dropped, ...legacy } = status;
    expect(() => checkSameJob(legacy, { primitive: 'encode', model: 'm', parts: 1, items: 2, contentHash: 'f'.repeat(64) })).not.toThrow();
    expect(() => checkSameJob(legacy, { primitive: 'encode', model: 'm', parts: 2, items: 3, contentHash })).toThrow(/already used by a different job/);
  });
});

describe('checkRemoteModelName', () => {
  it('accepts model ids and refuses paths', () => {
    for (const ok of ['BAAI/bge-small-en-v1.5', 'tiny-bert-mean', 'paddleocr/pp-ocrv4', 'org/name:with.dots']) expect(checkRemoteModelName(ok)).toBe(ok);
    for (const bad of ['../../etc/passwd', '/etc/passwd', '~/models/x', 'a/../b', 'a//b', './x', 'a\\b', 'tab\there', 'nul\u0000']) {
      expect(() => checkRemoteModelName(bad), bad).toThrow(/model/);
    }
    // A URL is named as one (it read "has an empty, \".\" or \"..\" segment"); a tag after a colon is a name.
    for (const url of ['https://evil/m', 'file:///etc/passwd', 's3://bucket/m', 'http:x']) expect(() => checkRemoteModelName(url), url).toThrow(/is a URL, not a model name/);
    expect(checkRemoteModelName('bge-m3:latest')).toBe('bge-m3:latest');
  });
});
