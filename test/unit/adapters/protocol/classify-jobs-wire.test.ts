import { describe, expect, it } from 'vitest';
import { ClassifyHttpRequest } from '../../../../adapters/protocol/classify.js';
import { ClassifyChunk, ClassifyJobRecord, ClassifyJobSpec, ClassifyRunEnd, classifyChunkMessageId, classifyJobNames, publicClassifyStatus } from '../../../../adapters/protocol/classify-jobs.js';
import { natsNames } from '../../../../adapters/protocol/subjects.js';

/**
 * The public wire contract of classification jobs (docs/nats.md, "Classification jobs"): strict
 * objects (a misspelt field is refused), bounded numbers, exactly one of `items` and `items_ref`,
 * error items kept as they are, a result target that names one object, and the names derived
 * from the prefix as the other topologies' are.
 */

const chunk = {
  v: 1,
  run_id: 'run-1',
  chunk: 0,
  spec_ref: 'obj://shoal_payloads/classify/run-1/spec.json',
  first_index: 0,
  items: ['trail shoes', { id: 'p2', text: 'android phone' }, { id: 'p3', error: { code: 'INVALID_INPUT', message: 'no text to classify' } }],
  submitted_at: '2026-11-29T10:00:00Z',
};

describe('classification job messages', () => {
  it('reads a chunk: text items become {text}, error items stay as they are', () => {
    const parsed = ClassifyChunk.parse(chunk);
    expect(parsed.items).toEqual([{ text: 'trail shoes' }, { id: 'p2', text: 'android phone' }, { id: 'p3', error: { code: 'INVALID_INPUT', message: 'no text to classify' } }]);
  });

  it('refuses a chunk with both items and items_ref, neither, a misspelt field, or a chunk number past the bound', () => {
    expect(ClassifyChunk.safeParse({ ...chunk, items_ref: 'obj://shoal_payloads/x.json' }).success).toBe(false);
    const { items: _items, ...bare } = chunk;
    expect(ClassifyChunk.safeParse(bare).success).toBe(false);
    expect(ClassifyChunk.safeParse({ ...bare, items_ref: 'obj://shoal_payloads/x.json' }).success).toBe(true);
    expect(ClassifyChunk.safeParse({ ...chunk, firstIndex: 0 }).success).toBe(false);
    expect(ClassifyChunk.safeParse({ ...chunk, chunk: 100_000 }).success).toBe(false);
    expect(ClassifyChunk.safeParse({ ...chunk, items: [] }).success).toBe(false);
    expect(ClassifyChunk.safeParse({ ...chunk, items: ['   '] }).success).toBe(false);
    expect(ClassifyChunk.safeParse({ ...chunk, run_id: 'a.b' }).success).toBe(false);
  });

  it('reads a spec (taxonomy or labels, exactly one) and an end; a result target names one object', () => {
    const spec = { v: 1, request: { model: 'm', labels: ['a', 'b'], top_k: 2 }, created_at: 'now' };
    expect(ClassifyJobSpec.parse(spec).request.labels).toEqual(['a', 'b']);
    expect(ClassifyJobSpec.safeParse({ ...spec, request: { model: 'm', labels: ['a'], taxonomy: 'A > B' } }).success).toBe(false);
    expect(ClassifyJobSpec.safeParse({ ...spec, request: { ...spec.request, items: ['x'] } }).success).toBe(false);
    expect(ClassifyJobSpec.safeParse({ ...spec, result: 's3://bucket/out/results.jsonl' }).success).toBe(true);
    for (const folder of ['obj://shoal_payloads', 's3://bucket/', 's3://bucket', 'file:///srv/out/']) {
      expect(ClassifyJobSpec.safeParse({ ...spec, result: folder }).success, folder).toBe(false);
      expect(ClassifyHttpRequest.safeParse({ model: 'm', labels: ['a'], items: ['x'], result: folder }).success, folder).toBe(false);
    }
    expect(ClassifyRunEnd.safeParse({ v: 1, run_id: 'run-1', spec_ref: chunk.spec_ref, chunks: 0, items: 0, submitted_at: 'now' }).success).toBe(false);
    expect(ClassifyRunEnd.parse({ v: 1, run_id: 'run-1', spec_ref: chunk.spec_ref, chunks: 3, items: 700, submitted_at: 'now' }).chunks).toBe(3);
  });

  it('shows a record as the public status: assembling is running, the bookkeeping stays inside', () => {
    const record = ClassifyJobRecord.parse({
      v: 1,
      job_id: 'run-1',
      kind: 'classify',
      state: 'assembling',
      model: 'm',
      items: 0,
      items_done: 512,
      categories: 7,
      error: null,
      chunks: 2,
      chunks_done: 2,
      counted: 'Aw==',
      spec_ref: chunk.spec_ref,
      result: 'obj://shoal_payloads/classify/run-1/results.jsonl',
      content_hash: 'a'.repeat(64),
      created_at: 'then',
      updated_at: 'now',
    });
    const status = publicClassifyStatus(record);
    expect(status).toMatchObject({ state: 'running', items: 512, items_done: 512, chunks: 2, chunks_done: 2, result: record.result });
    expect(status).not.toHaveProperty('counted');
    expect(status).not.toHaveProperty('content_hash');
  });

  it('derives the names from the prefix', () => {
    const names = classifyJobNames(natsNames('acme.prod'));
    expect(names).toMatchObject({ stream: 'ACME_PROD_CLASSIFY', chunks: 'acme.prod.classify.chunks', end: 'acme.prod.classify.end', consumer: 'acme_prod_classify', deadLetter: 'acme.prod.dlq.classify' });
    expect(names.allSubjects()).toBe('acme.prod.classify.>');
    expect(names.chunkObject('r', 3)).toBe('classify/r/chunk-3.jsonl');
    expect(classifyChunkMessageId('r', 3)).toBe('r.3');
  });
});
