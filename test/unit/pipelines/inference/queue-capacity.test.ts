import { describe, expect, it } from 'vitest';
import { ErrorCode, hasErrorCode } from '../../../../adapters/protocol/errors.js';
import { QueueCapacity } from '../../../../pipelines/inference/queue-capacity.js';

/** A promise's state without waiting for it. */
async function settled(promise: Promise<unknown>): Promise<boolean> {
  let done = false;
  promise.then(
    () => (done = true),
    () => (done = true),
  );
  await new Promise((resolve) => setImmediate(resolve));
  return done;
}

describe('QueueCapacity', () => {
  it('counts items in and out, over all lanes and per lane', () => {
    const capacity = new QueueCapacity(10);
    capacity.added('bulk');
    capacity.added('bulk');
    capacity.added('interactive');
    capacity.removed('bulk');
    expect(capacity.queued).toBe(2);
    expect(capacity.byLane).toEqual({ interactive: 1, bulk: 1 });
  });

  it('admits any number into an empty queue, else only up to the bound', () => {
    const capacity = new QueueCapacity(3);
    expect(capacity.hasRoom(50)).toBe(true);
    capacity.added('bulk');
    expect(capacity.hasRoom(2)).toBe(true);
    expect(capacity.hasRoom(3)).toBe(false);
  });

  it('holds a waiter until wake() finds room for it; one that fits goes on while a larger one waits', async () => {
    const capacity = new QueueCapacity(3);
    for (let i = 0; i < 3; i++) capacity.added('bulk');
    const big = capacity.waitForRoom(3);
    const small = capacity.waitForRoom(1);
    capacity.removed('bulk');
    expect(await settled(small)).toBe(false);
    capacity.wake();
    expect(await settled(small)).toBe(true);
    expect(await settled(big)).toBe(false);
    capacity.removed('bulk');
    capacity.removed('bulk');
    capacity.wake();
    expect(await settled(big)).toBe(true);
  });

  it('rejects a waiter with CANCELLED when its signal aborts, and forgets it', async () => {
    const capacity = new QueueCapacity(1);
    capacity.added('bulk');
    const controller = new AbortController();
    const waiting = capacity.waitForRoom(1, controller.signal);
    controller.abort();
    const error: unknown = await waiting.catch((e: unknown) => e);
    expect(hasErrorCode(error, ErrorCode.CANCELLED)).toBe(true);
    // Forgotten: waking later resolves nothing and throws nothing.
    capacity.removed('bulk');
    capacity.wake();
  });
});
