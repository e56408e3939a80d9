import { JetStreamApiError } from '@nats-io/jetstream';
import { describe, expect, it } from 'vitest';
import { isConcurrentCreate } from '../../../../adapters/nats/connection/nats-errors.js';
import { createBucket } from '../../../../adapters/nats/connection/topology.js';

/**
 * Services starting together (compose, a Helm release) create the same KV buckets and streams at
 * once. On nats-server 2.9 under load the slower create of a KV bucket now and then fails with
 * "subjects overlap with an existing stream" (10065) rather than "stream name in use" (10058):
 * 2–3 of 480 concurrent creates on a loaded 2-core machine (a scratch run; none with createBucket),
 * and one CI run's nats-stream-sizing "all succeed" test. Both mean the bucket now exists.
 */

const apiError = (code: number, description: string): JetStreamApiError => new JetStreamApiError({ code: 400, err_code: code, description });

describe('concurrent creates of one bucket or stream', () => {
  it('"stream name in use" and "subjects overlap" are a create another service won; other refusals are not', () => {
    expect(isConcurrentCreate(apiError(10058, 'stream name already in use with a different configuration'))).toBe(true);
    expect(isConcurrentCreate(apiError(10065, 'subjects overlap with an existing stream'))).toBe(true);
    expect(isConcurrentCreate(apiError(10047, 'insufficient storage resources available'))).toBe(false);
    expect(isConcurrentCreate(new Error('subjects overlap with an existing stream'))).toBe(false);
  });

  it('createBucket creates again (it then opens the bucket) after a lost race, and passes other failures on', async () => {
    let calls = 0;
    const created = await createBucket(async () => {
      calls += 1;
      if (calls === 1) throw apiError(10065, 'subjects overlap with an existing stream');
      return 'bucket';
    });
    expect(created).toBe('bucket');
    expect(calls).toBe(2);

    calls = 0;
    const refused = await createBucket(async () => {
      calls += 1;
      throw apiError(10047, 'insufficient storage resources available');
    }).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(JetStreamApiError);
    expect(calls).toBe(1);
  });
});
