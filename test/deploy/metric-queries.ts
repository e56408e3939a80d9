import { z } from 'zod';
import { JobBacklog, registerBacklogMetrics } from '../../adapters/nats/jobs/backlog.js';
import { DISPOSITIONS } from '../../adapters/nats/jobs/part-handler.js';
import { ShoalMetrics } from '../../adapters/observability/metrics.js';
import { ErrorCode } from '../../adapters/protocol/errors.js';
import { Priority } from '../../adapters/protocol/requests.js';
import { natsNames, PRIMITIVES } from '../../adapters/protocol/subjects.js';
import type { WriteOutcome } from '../../adapters/stores/shared/delivery.js';
import type { EvictionReason } from '../../pipelines/inference/pool-options.js';
import { parsePromQL, type Selector } from './promql.js';

/**
 * Checks a PromQL expression against what Shoal really exports: the families, types and sample
 * labels of real /metrics scrapes, completed by the label names the code registers (for families
 * the scrape declared but had no samples of) and the label values the code can produce (enums).
 * `problemsOf()` lists what is wrong, as `metric: what`, so a test can show them all at once.
 */

export interface SeriesInfo {
  labels: Set<string>;
  values: Map<string, Set<string>>;
}

export interface Exposition {
  /** Family name → prom-client type (counter, gauge, histogram, summary). */
  types: Map<string, string>;
  /** Exposed series name (with _bucket, _sum, _count, _total as printed) → labels seen on its samples. */
  series: Map<string, SeriesInfo>;
  /**
   * Family → the default labels (ShoalMetrics' defaultLabels: service, worker) of the processes
   * that export it: those with samples of it, else those that declare it.
   */
  defaults: Map<string, Set<string>>;
}

const SAMPLE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+\S+/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;
const HISTOGRAM_SUFFIXES = ['_bucket', '_sum', '_count'] as const;

function baseName(series: string, types: ReadonlyMap<string, string>): string {
  if (types.has(series)) return series;
  for (const suffix of HISTOGRAM_SUFFIXES) if (series.endsWith(suffix) && types.has(series.slice(0, -suffix.length))) return series.slice(0, -suffix.length);
  return series;
}

/** Several Prometheus text expositions (gateway, worker, sink) read as one. */
export function readExpositions(texts: readonly string[]): Exposition {
  const types = new Map<string, string>();
  const series = new Map<string, SeriesInfo>();
  const defaults = new Map<string, Set<string>>();
  const declaredOnly = new Map<string, Set<string>>();
  for (const text of texts) {
    const own = new Map<string, string>();
    const sampled = new Set<string>();
    const sampleLabels: Array<Set<string>> = [];
    for (const line of text.split('\n')) {
      const type = /^# TYPE (\S+) (\S+)$/.exec(line);
      if (type?.[1] !== undefined && type[2] !== undefined) own.set(type[1], type[2]);
      const sample = line.startsWith('#') ? null : SAMPLE.exec(line);
      if (sample?.[1] === undefined) continue;
      const info = series.get(sample[1]) ?? { labels: new Set<string>(), values: new Map<string, Set<string>>() };
      const labels = new Set<string>();
      for (const [, label = '', value = ''] of (sample[2] ?? '').matchAll(LABEL)) {
        labels.add(label);
        info.labels.add(label);
        info.values.set(label, (info.values.get(label) ?? new Set<string>()).add(value));
      }
      series.set(sample[1], info);
      sampled.add(baseName(sample[1], own));
      sampleLabels.push(labels);
    }
    // Labels on every sample of this process: its default labels.
    const common = (sampleLabels[0] === undefined ? [] : [...sampleLabels[0]]).filter((l) => sampleLabels.every((set) => set.has(l)));
    for (const [family, type] of own) {
      types.set(family, type);
      const target = sampled.has(family) ? defaults : declaredOnly;
      target.set(family, new Set([...(target.get(family) ?? []), ...common]));
    }
  }
  for (const [family, labels] of declaredOnly) if (!defaults.has(family)) defaults.set(family, labels);
  return { types, series, defaults };
}

/** Functions that take a counter (or a histogram's series), never a gauge. */
const COUNTER_FUNCTIONS = new Set(['rate', 'irate', 'increase', 'resets']);
/** Functions meant for gauges: on a counter they see resets as drops. */
const GAUGE_FUNCTIONS = new Set(['delta', 'idelta', 'deriv', 'predict_linear']);

/** The family an exposed series name belongs to, with its type, or null. */
export function familyOf(metric: string, exposition: Exposition): { family: string; type: string; suffix: string } | null {
  const direct = exposition.types.get(metric);
  if (direct !== undefined) return { family: metric, type: direct, suffix: '' };
  for (const suffix of HISTOGRAM_SUFFIXES) {
    if (!metric.endsWith(suffix)) continue;
    const family = metric.slice(0, -suffix.length);
    const type = exposition.types.get(family);
    if (type === 'histogram' || type === 'summary') return { family, type, suffix };
  }
  return null;
}

const RegisteredMetric = z.looseObject({ name: z.string(), labelNames: z.array(z.string()) });

/** Label names each family is registered with in the code (prom-client's metric objects). */
export function registeredLabels(): Map<string, Set<string>> {
  const metrics = new ShoalMetrics({ processMetrics: false });
  registerBacklogMetrics(metrics, new JobBacklog({ jsm: {} as never, names: natsNames() }));
  const out = new Map<string, Set<string>>();
  for (const metric of metrics.registry.getMetricsAsArray()) {
    const parsed = RegisteredMetric.parse(metric);
    out.set(parsed.name, new Set(parsed.labelNames));
  }
  return out;
}

const EVICTION_REASONS: Record<EvictionReason, true> = { capacity: true, idle: true, explicit: true, shutdown: true };
const WRITE_OUTCOMES: Record<WriteOutcome, true> = { ok: true, retry: true, failed: true };
const ERROR_CODES = Object.values(ErrorCode);
/** What the gateway counts: OK, a Shoal code, or HTTP_<status> for a failure that carries none. */
const REQUEST_CODES = ['OK', ...ERROR_CODES, ...Array.from({ length: 200 }, (_, i) => `HTTP_${400 + i}`)];

/** Label values the code can produce, per family and label (beyond those seen in the scrape). */
export const CODE_VALUES: Record<string, Record<string, readonly string[]>> = {
  shoal_job_parts_total: { outcome: DISPOSITIONS, primitive: PRIMITIVES },
  shoal_model_evictions_total: { reason: Object.keys(EVICTION_REASONS) },
  shoal_requests_total: { code: REQUEST_CODES },
  shoal_batch_failures_total: { code: ERROR_CODES },
  shoal_model_load_failures_total: { code: ERROR_CODES },
  shoal_sink_writes_total: { outcome: Object.keys(WRITE_OUTCOMES) },
  shoal_batches_total: { lane: Priority.options },
  shoal_batch_items_total: { lane: Priority.options },
  shoal_batch_tokens_total: { lane: Priority.options, kind: ['real', 'padded'] },
  shoal_batch_seconds: { lane: Priority.options },
  shoal_queue_wait_seconds: { lane: Priority.options },
  shoal_request_seconds: { lane: Priority.options },
  shoal_backlog_parts: { primitive: PRIMITIVES },
  shoal_backlog_items: { primitive: PRIMITIVES },
  shoal_backlog_tokens: { primitive: PRIMITIVES },
};

export interface QueryContext {
  exposition: Exposition;
  registered: Map<string, Set<string>>;
  /** Labels Prometheus adds to every Shoal target in every shipped deployment (job, instance, pool...). */
  targetLabels: ReadonlySet<string>;
}

function labelsOf(selector: Selector, family: string, context: QueryContext): Set<string> {
  const labels = new Set<string>(context.targetLabels);
  const add = (names: Iterable<string> | undefined): void => {
    for (const name of names ?? []) labels.add(name);
  };
  add(context.exposition.series.get(selector.metric)?.labels);
  add(context.registered.get(family));
  add(context.exposition.defaults.get(family));
  if (selector.metric.endsWith('_bucket')) labels.add('le');
  return labels;
}

function knownValues(family: string, label: string, context: QueryContext): Set<string> | null {
  const values = new Set<string>(CODE_VALUES[family]?.[label] ?? []);
  for (const [name, info] of context.exposition.series) {
    if (familyOf(name, context.exposition)?.family !== family) continue;
    for (const value of info.values.get(label) ?? []) values.add(value);
  }
  // Free-form labels (model ids, worker names) are not checked: only enums the code defines or the scrape shows.
  return CODE_VALUES[family]?.[label] !== undefined || ['service', 'kind', 'lane', 'outcome', 'reason', 'code'].includes(label) ? values : null;
}

function valueProblems(metric: string, family: string, matcher: { label: string; op: string; value: string }, context: QueryContext): string[] {
  const known = knownValues(family, matcher.label, context);
  if (known === null) return [];
  const regex = matcher.op === '=~' || matcher.op === '!~';
  const alternatives = regex ? matcher.value.split('|') : [matcher.value];
  return alternatives.flatMap((alternative) => {
    if (!regex || /^[A-Za-z0-9_-]*$/.test(alternative)) return known.has(alternative) ? [] : [`${metric}: ${matcher.label}="${alternative}" is never exported (known: ${[...known].slice(0, 12).join(', ')})`];
    const pattern = new RegExp(`^(?:${alternative})$`);
    return [...known].some((v) => pattern.test(v)) ? [] : [`${metric}: ${matcher.label}=~"${alternative}" matches no value Shoal exports`];
  });
}

/** Everything wrong with one expression: unknown metrics, wrong functions for the type, labels or values that never exist. */
export function problemsOf(expr: string, context: QueryContext): string[] {
  const parsed = parsePromQL(expr);
  const problems: string[] = [];
  for (const selector of parsed.selectors) {
    const found = familyOf(selector.metric, context.exposition);
    if (found === null) {
      problems.push(`${selector.metric}: no such series in the services' /metrics`);
      continue;
    }
    const { family, type, suffix } = found;
    if (type === 'histogram' && suffix === '') problems.push(`${selector.metric}: a histogram has no series of that name (use _bucket, _sum or _count)`);
    const direct = selector.within[0];
    if (direct !== undefined && COUNTER_FUNCTIONS.has(direct) && type === 'gauge') problems.push(`${selector.metric}: ${direct}() of a gauge`);
    if (direct !== undefined && GAUGE_FUNCTIONS.has(direct) && (type === 'counter' || suffix !== '')) problems.push(`${selector.metric}: ${direct}() of a counter`);
    if (selector.within.includes('histogram_quantile') && !(type === 'histogram' && suffix === '_bucket')) problems.push(`${selector.metric}: histogram_quantile() over something that is not a histogram's _bucket series`);
    if (selector.within.includes('histogram_quantile') && !selector.within.some((f) => COUNTER_FUNCTIONS.has(f))) problems.push(`${selector.metric}: histogram_quantile() of raw buckets (no rate() or increase())`);
    const labels = labelsOf(selector, family, context);
    for (const matcher of selector.matchers) {
      if (!labels.has(matcher.label)) problems.push(`${selector.metric}: no label ${matcher.label}`);
      else problems.push(...valueProblems(selector.metric, family, matcher, context));
    }
  }
  for (const list of parsed.labelLists) {
    for (const label of list.labels) {
      const carriers = list.scope.filter((s) => {
        const found = familyOf(s.metric, context.exposition);
        return found !== null && labelsOf(s, found.family, context).has(label);
      });
      // by (...): every aggregated series must carry the label; on/ignoring/without: at least one.
      const missing = list.kind === 'by' ? list.scope.filter((s) => !carriers.includes(s)) : carriers.length === 0 ? list.scope : [];
      for (const s of missing) problems.push(`${s.metric}: ${list.kind} (${label}) but the series has no label ${label}`);
    }
  }
  return [...new Set(problems)];
}
