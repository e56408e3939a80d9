import { describe, expect, it } from 'vitest';
import { BatchProgress } from '../../../../pipelines/documents/batch-progress.js';

/** The clock a documents worker gives up a stalled batch by (document-jobs.ts): progress resets it, an index build stops it. */
describe('BatchProgress', () => {
  it('counts the time since the last progress, and none while an index build runs', () => {
    let now = 1_000;
    const progress = new BatchProgress(() => now);
    now += 400;
    expect(progress.idleMs()).toBe(400);
    progress.touch();
    now += 250;
    expect(progress.idleMs()).toBe(250);
    // Two lanes of a batch build their indexes at once: the clock runs again only when both ended.
    progress.indexing(true);
    progress.indexing(true);
    now += 3_600_000;
    expect(progress.idleMs()).toBe(0);
    progress.indexing(false);
    expect(progress.idleMs()).toBe(0);
    progress.indexing(false);
    // The end of the build is progress: the clock starts from it.
    now += 100;
    expect(progress.idleMs()).toBe(100);
    // An extra end (a lane that failed before its build) never makes the count negative.
    progress.indexing(false);
    progress.indexing(true);
    now += 5_000;
    expect(progress.idleMs()).toBe(0);
  });
});
