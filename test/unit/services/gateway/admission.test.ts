import { describe, expect, it } from 'vitest';
import { isShoalError } from '../../../../adapters/protocol/errors.js';
import { Admission } from '../../../../services/gateway/admission.js';

/** Admission control of the gateway's sync path: budget per model, OVERLOADED with a Retry-After from the backlog. */

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

describe('Admission', () => {
  it('admits calls while they fit the model budget, refuses the rest at once, and frees the budget after', async () => {
    const admission = new Admission({ maxInFlightItemsPerModel: 100 });
    let release: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const first = admission.run('m', 60, () => gate.then(() => 'first'));
    const second = admission.run('m', 40, () => gate.then(() => 'second'));
    expect(admission.inFlight('m')).toBe(100);
    const refused = await admission.run('m', 1, async () => 'third').catch((e: unknown) => e);
    expect(isShoalError(refused) && refused.code).toBe('OVERLOADED');
    // Another model has its own budget.
    expect(await admission.run('other', 100, async () => 'other')).toBe('other');
    release();
    expect(await Promise.all([first, second])).toEqual(['first', 'second']);
    expect(admission.inFlight('m')).toBe(0);
    expect(await admission.run('m', 100, async () => 'after')).toBe('after');
  });

  it('always admits a call alone, even one larger than the budget', async () => {
    const admission = new Admission({ maxInFlightItemsPerModel: 10 });
    expect(await admission.run('m', 500, async () => 'big')).toBe('big');
  });

  it('derives Retry-After from the backlog and the measured throughput', async () => {
    const admission = new Admission({ maxInFlightItemsPerModel: 100 });
    // 10 items per 100 ms, one call at a time: about 100 items/s.
    for (let i = 0; i < 4; i++) await admission.run('m', 10, () => sleep(100));
    const slow = admission.run('m', 100, () => sleep(300));
    const refused = await admission.run('m', 10, async () => undefined).catch((e: unknown) => e);
    await slow;
    expect(isShoalError(refused) && refused.code).toBe('OVERLOADED');
    const hinted = isShoalError(refused) ? refused.details?.retryAfterSeconds : undefined;
    // 100 items at ~100 items/s: 1 s (ceil; timer slack may make the measured rate a little lower).
    expect(hinted).toBeGreaterThanOrEqual(1);
    expect(hinted).toBeLessThanOrEqual(2);

    const slower = new Admission({ maxInFlightItemsPerModel: 100 });
    // 10 items per 500 ms: 20 items/s, so a backlog of 100 items takes about 5 s.
    await slower.run('m', 10, () => sleep(500));
    const busy = slower.run('m', 100, () => sleep(100));
    const late = await slower.run('m', 10, async () => undefined).catch((e: unknown) => e);
    await busy;
    const seconds = isShoalError(late) ? late.details?.retryAfterSeconds : undefined;
    expect(seconds).toBeGreaterThanOrEqual(5);
    expect(seconds).toBeLessThanOrEqual(6);
  });

  it('forgets models whose calls never succeeded (made-up names leave nothing behind)', async () => {
    const admission = new Admission({ maxInFlightItemsPerModel: 10 });
    for (let i = 0; i < 50; i++) await admission.run(`made-up-${i}`, 1, async () => Promise.reject(new Error('no such model'))).catch(() => undefined);
    expect(admission.trackedModels).toBe(0);
  });

  it('admits fewer items for a slow model: the expected wait of an admitted call stays under maxQueueSeconds', async () => {
    const admission = new Admission({ maxInFlightItemsPerModel: 1000, maxQueueSeconds: 1 });
    // 10 items per 500 ms: 20 items/s, so at most about 20 items may be ahead of a call.
    await admission.run('slow', 10, () => sleep(500));
    const first = admission.run('slow', 10, () => sleep(200));
    const refused = await admission.run('slow', 15, async () => undefined).catch((e: unknown) => e);
    await first;
    expect(isShoalError(refused) && refused.code).toBe('OVERLOADED');
    // The same call fits a fast model's budget.
    expect(await admission.run('fast', 15, async () => 'ok')).toBe('ok');
  });
});
