import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ErrorCode, ShoalError } from '../../../../adapters/protocol/errors.js';
import { parseIndexRef, type IndexRef } from '../../../../adapters/stores/open.js';
import { LazyStore } from '../../../../adapters/stores/shared/lazy.js';
import type { Store } from '../../../../adapters/stores/store.js';
import { IndexPool } from '../../../../services/gateway/index-pool.js';

/**
 * The gateway's index pool (issue 41): each configured index parsed at start, its store opened on
 * first use and kept across requests, reopened after an outage, closed with the gateway.
 */

const dir = await mkdtemp(join(tmpdir(), 'shoal-index-pool-'));
afterAll(() => rm(dir, { recursive: true, force: true }));

/** Real file:// stores, with every open and close counted. */
function counting(): { parse: typeof parseIndexRef; opened: Store[]; closed: number } {
  const counts = { opened: [] as Store[], closed: 0 };
  const parse = (uri: string, options?: Parameters<typeof parseIndexRef>[1]): IndexRef => {
    const ref = parseIndexRef(uri, options);
    return {
      ...ref,
      open: () => {
        const store = ref.open();
        const close = store.close.bind(store);
        store.close = async () => {
          counts.closed += 1;
          await close();
        };
        counts.opened.push(store);
        return store;
      },
    };
  };
  return Object.assign(counts, { parse });
}

const SPEC = { dimension: 2, distance: 'cosine' as const, optionalColumns: [], metadata: { model: 'm' } };

describe('IndexPool', () => {
  it('refuses a bad configured URI when the gateway starts, naming the index', () => {
    expect(() => new IndexPool({ good: join(dir, 'a'), bad: 'mysql://h/db' })).toThrow(expect.objectContaining({ code: ErrorCode.CONFIG_INVALID, message: expect.stringMatching(/^SHOAL_INDEXES: index "bad": index: unknown scheme/) }));
  });

  it('answers NOT_FOUND naming the configured indexes for any other name', () => {
    const pool = new IndexPool({ notes: join(dir, 'n') });
    expect(() => pool.ref('other')).toThrow(expect.objectContaining({ code: ErrorCode.NOT_FOUND, details: { index: 'other', configured: ['notes'] } }));
    expect(pool.names()).toEqual(['notes']);
  });

  it('opens a store once and keeps it across borrows: a borrower closing it leaves it open', async () => {
    const counts = counting();
    const pool = new IndexPool({ docs: `file://${join(dir, 'kept')}` }, {}, counts.parse);
    expect(counts.opened).toHaveLength(0);
    const first = pool.borrow('docs');
    await first.store.prepare(SPEC);
    await first.store.commit([{ id: 'r', document_id: 'd', source: 's', page: 1, chunk: 0, text: 't', start: 0, end: 1, heading: null, settings: 'x', vector: [1, 0], entities: null, labels: null, ingested_at: 'now' }], [{ source: 's', document_id: 'd', settings: 'x', chunks: 1, pages: 1, ingested_at: 'now' }]);
    await first.store.close();
    for (let request = 0; request < 5; request += 1) {
      const { store } = pool.borrow('docs');
      expect(await store.count()).toBe(1);
      await store.close();
    }
    expect(counts.opened).toHaveLength(1);
    expect(counts.closed).toBe(0);
    // A file:// store, imported on first use like every backend.
    expect(counts.opened[0]).toBeInstanceOf(LazyStore);
    await pool.close();
    expect(counts.closed).toBe(1);
    expect(() => pool.borrow('docs')).toThrow(expect.objectContaining({ code: ErrorCode.UNAVAILABLE }));
  });

  it('reopens the store after an outage, and keeps it after the caller\'s own mistakes', async () => {
    const counts = counting();
    const pool = new IndexPool({ docs: `file://${join(dir, 'reopen')}` }, {}, counts.parse);
    pool.borrow('docs');
    pool.failed('docs', new ShoalError(ErrorCode.INVALID_INPUT, 'filter: bad'));
    pool.borrow('docs');
    expect(counts.opened).toHaveLength(1);
    pool.failed('docs', new ShoalError(ErrorCode.UNAVAILABLE, 'file still failing after 3 attempts'));
    await new Promise((resolve) => setImmediate(resolve));
    expect(counts.closed).toBe(1);
    pool.borrow('docs');
    expect(counts.opened).toHaveLength(2);
    await pool.close();
  });
});
