import { describe, expect, it } from 'vitest';
import type { LoadedModel } from '../../../../pipelines/inference/loaded-model.js';
import { idledOut, lruIdle, memoryHolders, residentModel, type Entry } from '../../../../pipelines/inference/pool-entries.js';

function entry(name: string, fields: Partial<Entry> = {}): Entry {
  return {
    name,
    state: 'ready',
    ready: new Promise<LoadedModel>(() => undefined),
    model: null,
    chargedBytes: 100,
    leases: 0,
    pinned: false,
    lastUsed: 0,
    useSeq: 0,
    ...fields,
  };
}

describe('pool entries', () => {
  it('picks the least recently used idle model, by use order, never self, loading, leased or pinned ones', () => {
    const self = entry('self', { useSeq: 0 });
    const entries = [
      self,
      entry('loading', { state: 'loading', useSeq: 1 }),
      entry('leased', { leases: 1, useSeq: 2 }),
      entry('pinned', { pinned: true, useSeq: 3 }),
      entry('newer', { useSeq: 9 }),
      entry('older', { useSeq: 5 }),
    ];
    expect(lruIdle(entries, self)?.name).toBe('older');
    expect(lruIdle(entries.slice(0, 4), self)).toBeNull();
  });

  it('says a model idled out only when it is evictable and unused for the whole idle time', () => {
    expect(idledOut(entry('a', { lastUsed: 1_000 }), 2_000, 1_000)).toBe(true);
    expect(idledOut(entry('a', { lastUsed: 1_001 }), 2_000, 1_000)).toBe(false);
    expect(idledOut(entry('a', { lastUsed: 0, leases: 1 }), 2_000, 1_000)).toBe(false);
    expect(idledOut(entry('a', { lastUsed: 0, pinned: true }), 2_000, 1_000)).toBe(false);
  });

  it('names the other models holding memory and why they stay', () => {
    const self = entry('self');
    const holders = memoryHolders([self, entry('p', { pinned: true }), entry('busy', { leases: 2 }), entry('empty', { chargedBytes: 0 })], self);
    expect(holders).toEqual(['p (pinned)', 'busy (2 in flight)']);
  });

  it('shows a record without a model yet as a loading model with unknown sizes', () => {
    expect(residentModel(entry('m', { state: 'loading', leases: 3, lastUsed: 7 }))).toEqual({
      name: 'm',
      family: null,
      state: 'loading',
      chargedBytes: 100,
      predictedBytes: null,
      measuredBytes: null,
      lastUsed: 7,
      inFlight: 3,
      pinned: false,
      interactive: false,
    });
  });
});
