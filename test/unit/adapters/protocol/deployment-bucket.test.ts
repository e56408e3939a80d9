import { describe, expect, it } from 'vitest';
import { isDeploymentBucket, natsNames } from '../../../../adapters/protocol/subjects.js';

/** Issue 42 item 15: which object store buckets a deployment's obj:// references may name. */
describe('isDeploymentBucket', () => {
  const shoal = natsNames('shoal').payloadBucket;

  it("takes the deployment's payload bucket and its <p>-<name> buckets", () => {
    expect(isDeploymentBucket(shoal, 'shoal_payloads')).toBe(true);
    expect(isDeploymentBucket(shoal, 'shoal-results')).toBe(true);
    expect(isDeploymentBucket(natsNames('shoal.eu').payloadBucket, 'shoal_eu-results')).toBe(true);
  });

  it("refuses every other deployment's bucket, including prefixes that extend this one", () => {
    for (const prefix of ['acme', 'shoal.eu', 'shoal-eu', 'shoal_eu', 'shoalx']) {
      const other = natsNames(prefix).payloadBucket;
      expect(isDeploymentBucket(shoal, other), other).toBe(false);
      expect(isDeploymentBucket(other, shoal), other).toBe(false);
    }
    for (const bucket of ['shoal-', 'shoal_results', 'results', 'shoal', 'xshoal-results']) expect(isDeploymentBucket(shoal, bucket), bucket).toBe(false);
  });
});
