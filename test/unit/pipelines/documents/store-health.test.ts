import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { withRetry as withS3Retry } from '../../../../adapters/object-store/index.js';
import { ShoalMetrics } from '../../../../adapters/observability/metrics.js';
import { ErrorCode, ShoalError } from '../../../../adapters/protocol/errors.js';
import type { Degraded } from '../../../../adapters/protocol/jobs.js';
import { RetryingStore } from '../../../../adapters/stores/shared/delivery.js';
import { JsonlStore } from '../../../../adapters/stores/file/store.js';
import type { ChunkRow, DocumentState, Store } from '../../../../adapters/stores/store.js';
import { StoreHealth } from '../../../../pipelines/documents/store-health.js';

/**
 * An ingest run's degraded mark (store-health.ts) fed by the real retry loops: RetryingStore over
 * a real file:// sink whose commits fail transiently a given number of times, and the S3 retry
 * of adapters/object-store. The mark appears at the first retried failure, keeps its first
 * `since`, and goes at the next success; the summary's periods record each stretch.
 */

const dir = await mkdtemp(join(tmpdir(), 'shoal-store-health-'));
afterAll(() => rm(dir, { recursive: true, force: true }));

const ROW: ChunkRow = { id: 'r1', document_id: 'd', source: 'a.txt', page: 1, chunk: 0, text: 't', start: 0, end: 1, heading: null, settings: 's', vector: [1, 0], entities: null, labels: null, ingested_at: 'now' };
const STATE: DocumentState = { source: 'a.txt', document_id: 'd', settings: 's', chunks: 1, pages: 1, ingested_at: 'now' };

/** The real JSON Lines sink, with its first `failures` commits refused as a store that is down would refuse them. */
function flaky(table: string, failures: number, onCommit: () => void): Store {
  const inner = new JsonlStore({ dir, table });
  let left = failures;
  return new Proxy(inner, {
    get(target, property, receiver) {
      if (property === 'commit') {
        return async (rows: readonly ChunkRow[], states: readonly DocumentState[]) => {
          onCommit();
          if (left > 0) {
            left -= 1;
            throw new ShoalError(ErrorCode.UNAVAILABLE, 'connect ECONNREFUSED 127.0.0.1:5432');
          }
          return target.commit(rows, states);
        };
      }
      const value: unknown = Reflect.get(target, property, receiver);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

describe('StoreHealth', () => {
  it('marks the run degraded while RetryingStore retries a commit, and clears it when the commit lands', async () => {
    const health = new StoreHealth();
    const metrics = new ShoalMetrics({ processMetrics: false });
    const changes: (Degraded | null)[] = [];
    health.onChange((_store, degraded) => changes.push(degraded));
    const seenDuring: (Degraded | null)[] = [];
    const sink = new RetryingStore(flaky('commits', 3, () => seenDuring.push(health.degraded)), 'pgvector', { baseDelayMs: 5, maxDelayMs: 10 }, health.sinkObserver(metrics.sinkObserver));
    await sink.prepare({ dimension: 2, distance: 'cosine', optionalColumns: [], metadata: {} });
    await sink.commit([ROW], [STATE]);

    // Tries 2..4 ran while the mark was on; the first ran before any failure.
    expect(seenDuring[0]).toBeNull();
    expect(seenDuring).toHaveLength(4);
    for (const mark of seenDuring.slice(1)) expect(mark?.reason).toBe('pgvector unavailable, retrying: connect ECONNREFUSED 127.0.0.1:5432');
    expect(new Set(seenDuring.slice(1).map((mark) => mark?.since)).size).toBe(1);
    expect(changes).toHaveLength(2);
    expect(changes[0]?.reason).toContain('ECONNREFUSED');
    expect(changes[1]).toBeNull();
    expect(health.degraded).toBeNull();
    expect(health.periods).toHaveLength(1);
    expect(health.periods[0]).toMatchObject({ store: 'pgvector', until: expect.any(String) });
    expect(await sink.count()).toBe(1);
    // The metrics observer still hears every write outcome through the chain.
    const writes = await metrics.registry.getSingleMetricAsString('shoal_sink_writes_total');
    expect(writes).toContain('backend="pgvector",outcome="retry"} 3');
    expect(writes).toContain('backend="pgvector",outcome="ok"} 1');
  });

  it('reports S3 retries and the next successful read, and names every failing store', async () => {
    const health = new StoreHealth();
    let calls = 0;
    const value = await withS3Retry(
      'read s3://b/k',
      async () => {
        calls += 1;
        if (calls <= 2) throw Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' });
        // While S3 retries, the index fails too: one mark, the earliest failure first.
        if (calls === 3) {
          health.failing('pgvector', 'Connection terminated');
          expect(health.failingStores().sort()).toEqual(['pgvector', 's3']);
          expect(health.degraded?.reason).toMatch(/^s3 unavailable, retrying: .*ECONNREFUSED.*\(and 1 other store\)$/);
        }
        return 'bytes';
      },
      { budgetMs: 5_000, baseDelayMs: 5, maxDelayMs: 10, ...health.s3 },
    );
    expect(value).toBe('bytes');
    expect(health.failingStores()).toEqual(['pgvector']);
    expect(health.degraded?.reason).toBe('pgvector unavailable, retrying: Connection terminated');
    health.succeeded('pgvector');
    expect(health.degraded).toBeNull();
    expect(health.periods.map((period) => period.store)).toEqual(['s3', 'pgvector']);
  });
});
