import { describe, expect, it } from 'vitest';
import { partRows, rowId } from '../../../../adapters/nats/results/result-index.js';
import { JobStatus, WIRE_VERSION, type JobPartResult } from '../../../../adapters/protocol/jobs.js';

/** Rows of a job part for a vector store: deterministic ids, one source per part, items without a dense vector skipped. */

const message: JobPartResult = {
  v: WIRE_VERSION,
  job_id: 'job-7',
  part: 2,
  parts: 3,
  primitive: 'encode',
  model: 'org/model',
  status: 'ok',
  worker: 'w1',
  finished_at: '2026-11-25T18:00:00.000Z',
};

describe('partRows', () => {
  const result = {
    items: [
      { index: 8, id: 'doc-a', dense: [0.5, -0.25, 1] },
      { index: 9, dense: [1, 0, 0] },
      { index: 10, id: 42, dense: [0, 1, 0] },
      { index: 11, id: 'sparse-only' },
    ],
  };

  it('uses the item id, else <job>:<index>, and skips items without a dense vector', () => {
    const { rows, state, skipped } = partRows(message, result, new Date('2026-11-25T18:01:00.000Z'));
    expect(rows.map((row) => row.id)).toEqual(['doc-a', 'job-7:9', '42']);
    expect(skipped).toBe(1);
    expect(rows.map((row) => Array.from(row.vector))).toEqual([[0.5, -0.25, 1], [1, 0, 0], [0, 1, 0]]);
    expect(rows.map((row) => [row.document_id, row.page, row.chunk, row.settings, row.source])).toEqual([
      ['job-7', 2, 8, 'org/model', 'shoal-job://job-7/part-2'],
      ['job-7', 2, 9, 'org/model', 'shoal-job://job-7/part-2'],
      ['job-7', 2, 10, 'org/model', 'shoal-job://job-7/part-2'],
    ]);
    expect(state).toEqual({ source: 'shoal-job://job-7/part-2', document_id: 'job-7', settings: 'org/model', chunks: 3, pages: 1, ingested_at: '2026-11-25T18:01:00.000Z' });
  });

  it('gives the same ids on a redelivery (an upsert replaces, never adds)', () => {
    const first = partRows(message, result).rows.map((row) => row.id);
    const again = partRows(message, result).rows.map((row) => row.id);
    expect(again).toEqual(first);
    expect(rowId('j', { index: 3 })).toBe('j:3');
  });
});

describe('JobStatus.degraded', () => {
  const base = {
    v: WIRE_VERSION, job_id: 'j', state: 'completed', primitive: 'encode', model: 'm', parts: 1, parts_done: 1, parts_failed: 0, items: 1, errors: [],
    result: { kind: 'stream' }, created_at: '2026-11-25T18:00:00.000Z', updated_at: '2026-11-25T18:00:00.000Z',
  };

  it('is optional, bounded and strict', () => {
    expect(JobStatus.safeParse(base).success).toBe(true);
    expect(JobStatus.safeParse({ ...base, degraded: { reason: 'store down', since: '2026-11-25T18:00:01.000Z' } }).success).toBe(true);
    expect(JobStatus.safeParse({ ...base, degraded: { reason: 'x'.repeat(1001), since: 'now' } }).success).toBe(false);
    expect(JobStatus.safeParse({ ...base, degraded: { reason: 'r', since: 'now', extra: 1 } }).success).toBe(false);
  });
});
