import { describe, expect, it } from 'vitest';
import { excerpt, queryTerms } from '../../../../services/gateway/console/browser/highlight.js';
import { parsePrometheus, sumBy } from '../../../../services/gateway/console/browser/prometheus.js';
import { failuresOf, progressOf } from '../../../../services/gateway/console/browser/progress.js';
import { ShoalMetrics } from '../../../../adapters/observability/metrics.js';

/**
 * The console's pure browser modules, run here under Node: the Prometheus text the models view
 * reads (from a real ShoalMetrics registry), the query words it marks, and the progress and
 * failures it shows for each kind of job. Their DOM side is tested in Chromium
 * (test/integration/console-browser.test.ts).
 */

describe('parsePrometheus', () => {
  it("reads a real registry's exposition: gauges, labelled counters, histogram sums and counts", async () => {
    const metrics = new ShoalMetrics({ processMetrics: false, defaultLabels: { service: 'dev' } });
    metrics.poolBudgetBytes.set(12_000_000_000);
    metrics.poolResidentBytes.set(24_000_000);
    metrics.modelResidentBytes.set({ model: 'org/model "quoted"' }, 24_000_000);
    metrics.batches.inc({ model: 'a', lane: 'bulk' }, 3);
    metrics.batches.inc({ model: 'b', lane: 'bulk' }, 2);
    metrics.batches.inc({ model: 'a', lane: 'interactive' });
    metrics.queueWaitSeconds.observe({ lane: 'bulk' }, 0.5);
    metrics.queueWaitSeconds.observe({ lane: 'bulk' }, 1.5);
    metrics.queuedItems.set({ lane: 'interactive' }, 2);
    metrics.queuedItems.set({ lane: 'bulk' }, 5);
    const samples = parsePrometheus(await metrics.registry.metrics());
    expect(sumBy(samples, 'shoal_pool_budget_bytes').get('')).toBe(12_000_000_000);
    expect([...sumBy(samples, 'shoal_model_resident_bytes', 'model')]).toEqual([['org/model "quoted"', 24_000_000]]);
    expect(Object.fromEntries(sumBy(samples, 'shoal_batches_total', 'lane'))).toEqual({ bulk: 5, interactive: 1 });
    expect(sumBy(samples, 'shoal_queue_wait_seconds_sum', 'lane').get('bulk')).toBe(2);
    expect(sumBy(samples, 'shoal_queue_wait_seconds_count', 'lane').get('bulk')).toBe(2);
    // The queue depth per lane (an older worker without the label would stand under '').
    expect(Object.fromEntries(sumBy(samples, 'shoal_queue_items', 'lane'))).toEqual({ interactive: 2, bulk: 5 });
    expect(samples.find((sample) => sample.name === 'shoal_pool_budget_bytes')?.labels).toEqual({ service: 'dev' });
  });

  it('skips comments, blank and malformed lines; reads timestamps, NaN-free values, escapes', () => {
    const samples = parsePrometheus(['# HELP x y', '', 'x{a="1\\n2",b="c\\\\d"} 3 1700000000', 'broken line here', 'y NaN', 'z +Inf', 'w{} -2.5e3'].join('\n'));
    expect(samples).toEqual([
      { name: 'x', labels: { a: '1\n2', b: 'c\\d' }, value: 3 },
      { name: 'z', labels: {}, value: Infinity },
      { name: 'w', labels: {}, value: -2500 },
    ]);
  });
});

describe('query words', () => {
  it('takes words of two characters or more, once each, longest first (in query order among equals), in any script', () => {
    expect(queryTerms('When is the pilot boat taken OUT of the water? a')).toEqual(['pilot', 'taken', 'water', 'when', 'boat', 'the', 'out', 'is', 'of']);
    expect(queryTerms('Überfahrt nach Sylt')).toEqual(['überfahrt', 'nach', 'sylt']);
    expect(queryTerms('  ?! ')).toEqual([]);
  });

  it('cuts an excerpt at a word and marks it as cut', () => {
    expect(excerpt('short text', 100)).toBe('short text');
    expect(excerpt('one two three four five', 12)).toBe('one two …');
  });
});

describe('progress of each kind of job', () => {
  it('counts documents of an ingest run, items of a classification, parts of a job; lists every failure with its code', () => {
    const run = { kind: 'ingest', state: 'partial', documents: { total: 4, ok: 2, failed: 1, unchanged: 1 }, failed: [{ source: 'a.pdf', code: 'PARSE_FAILED', reason: 'broken xref' }] };
    expect(progressOf(run)).toEqual({ done: 4, total: 4, unit: 'documents' });
    expect(failuresOf(run)).toEqual([{ code: 'PARSE_FAILED', where: 'a.pdf', reason: 'broken xref' }]);
    expect(progressOf({ kind: 'classify', items: 10, items_done: 3, error: null })).toEqual({ done: 3, total: 10, unit: 'items' });
    const job = { state: 'partial', parts: 3, parts_done: 1, parts_failed: 1, errors: [{ part: 2, code: 'MODEL_NOT_FOUND', message: 'no such model' }] };
    expect(progressOf(job)).toEqual({ done: 2, total: 3, unit: 'parts' });
    expect(failuresOf(job)).toEqual([{ code: 'MODEL_NOT_FOUND', where: 'part 2', reason: 'no such model' }]);
    expect(failuresOf({ kind: 'classify', error: { code: 'TIMEOUT', message: 'too slow' } })).toEqual([{ code: 'TIMEOUT', where: 'run', reason: 'too slow' }]);
    // A field of the wrong type reads as absent.
    expect(progressOf({ kind: 'ingest', documents: { total: '4' } })).toEqual({ done: 0, total: 0, unit: 'documents' });
  });
});
