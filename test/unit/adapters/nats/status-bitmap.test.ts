import { describe, expect, it } from 'vitest';
import { bitmapHas, bitmapSet, initialStatus } from '../../../../adapters/nats/jobs/status-store.js';
import { JobStatus } from '../../../../adapters/protocol/jobs.js';

describe('counted-parts bitmap', () => {
  it('records each part once and answers for parts never set', () => {
    let bitmap: string | undefined;
    const parts = 37;
    const set = [0, 7, 8, 15, 36];
    for (const part of set) bitmap = bitmapSet(bitmap, part, parts);
    for (let part = 0; part < parts; part++) expect(bitmapHas(bitmap, part), `part ${part}`).toBe(set.includes(part));
    expect(bitmapHas(bitmap, 1000)).toBe(false);
    expect(bitmapHas(undefined, 0)).toBe(false);
    // Setting a part again changes nothing.
    expect(bitmapSet(bitmap, 7, parts)).toBe(bitmap);
    expect(Buffer.from(bitmap ?? '', 'base64').length).toBe(5);
  });

  it('fits the status schema', () => {
    const status = initialStatus(
      { job_id: 'j', primitive: 'encode', model: 'm', parts: 100_000, result: { kind: 'stream' } },
      5,
      new Date('2030-01-01T00:00:00Z'),
    );
    const counted = bitmapSet(undefined, 99_999, 100_000);
    expect(JobStatus.parse({ ...status, counted_parts: counted })).toMatchObject({ state: 'queued', parts: 100_000, items: 5 });
    expect(bitmapHas(counted, 99_999)).toBe(true);
  });
});
