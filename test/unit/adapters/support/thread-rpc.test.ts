import { describe, expect, it } from 'vitest';
import { ErrorCode, hasErrorCode } from '../../../../adapters/protocol/errors.js';
import { spawnThread } from '../../../../adapters/support/spawn-thread.js';
import { ThreadClient } from '../../../../adapters/support/thread-rpc.js';

type Request = { op: 'echo'; value: number } | { op: 'fail' } | { op: 'die' } | { op: 'slow'; ms: number };

function start(): ThreadClient<Request, number> {
  const worker = spawnThread(new URL('../../../helpers/threads/echo-thread.ts', import.meta.url));
  return new ThreadClient<Request, number>(worker, { name: 'echo thread' });
}

describe('ThreadClient', () => {
  it('matches answers to requests and keeps order', async () => {
    const client = start();
    const answers = await Promise.all([1, 2, 3, 4].map((value) => client.request({ op: 'echo', value })));
    expect(answers).toEqual([1, 2, 3, 4]);
    await client.close();
  });

  it('carries ShoalError codes and details across the thread boundary', async () => {
    const client = start();
    const error = await client.request({ op: 'fail' }).catch((e: unknown) => e);
    expect(hasErrorCode(error, ErrorCode.INVALID_INPUT)).toBe(true);
    expect(error).toMatchObject({ message: 'bad value', details: { field: 'value' } });
    expect(await client.request({ op: 'echo', value: 9 })).toBe(9);
    await client.close();
  });

  it('rejects every pending request when the thread dies, and refuses new ones', async () => {
    const client = start();
    const slow = client.request({ op: 'slow', ms: 300 });
    const dying = client.request({ op: 'die' });
    // The thread handles requests in order: 'die' runs after 'slow', so kill it via die after slow.
    const results = await Promise.allSettled([slow, dying]);
    expect(results[0]?.status).toBe('fulfilled');
    expect(results[1]?.status).toBe('rejected');
    const after = await client.request({ op: 'echo', value: 1 }).catch((e: unknown) => e);
    expect(hasErrorCode(after, ErrorCode.UNAVAILABLE)).toBe(true);
    expect(client.alive).toBe(false);
  });

  it('close() rejects in-flight work with UNAVAILABLE and is idempotent', async () => {
    const client = start();
    await client.request({ op: 'echo', value: 0 });
    const pending = client.request({ op: 'slow', ms: 5000 }).catch((e: unknown) => e);
    await client.close();
    await client.close();
    expect(hasErrorCode(await pending, ErrorCode.UNAVAILABLE)).toBe(true);
  });
});
