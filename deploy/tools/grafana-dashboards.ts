import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { writeGenerated } from './generated-files.js';
import { DEPLOY_DIR } from './nats-config.js';

/**
 * Writes Shoal's Grafana dashboards (deploy/grafana/dashboards/*.json) from the compact table
 * below, so every panel's query is in one readable place and the JSON stays consistent:
 *   npx tsx deploy/tools/grafana-dashboards.ts           # write
 *   npx tsx deploy/tools/grafana-dashboards.ts --check   # exit 1 when the JSON files are stale
 * Every query is checked against a running gateway's, worker's and sink's /metrics (names, types,
 * labels, label values) by test/deploy/dashboard-queries.test.ts. Backlog gauges come from every
 * gateway replica alike: max(), not sum(). The gateway and the sink export the engine's pool gauges
 * too (at 0): worker panels select service="worker".
 */

export const DASHBOARD_DIR = join(DEPLOY_DIR, 'grafana', 'dashboards');

interface Panel {
  title: string;
  unit: string;
  targets: Array<{ expr: string; legend: string }>;
}

interface Dashboard {
  uid: string;
  title: string;
  panels: Panel[];
}

const W = '$__rate_interval';

export const DASHBOARDS: readonly Dashboard[] = [
  {
    uid: 'shoal-throughput',
    title: 'Shoal / Throughput',
    panels: [
      { title: 'Items per second by model and lane', unit: 'ops', targets: [{ expr: `sum by (model, lane) (rate(shoal_batch_items_total[${W}]))`, legend: '{{model}} {{lane}}' }] },
      { title: 'Real tokens per second by model', unit: 'ops', targets: [{ expr: `sum by (model) (rate(shoal_batch_tokens_total{kind="real"}[${W}]))`, legend: '{{model}}' }] },
      { title: 'HTTP requests per second by primitive', unit: 'reqps', targets: [{ expr: `sum by (primitive) (rate(shoal_requests_total[${W}]))`, legend: '{{primitive}}' }] },
      { title: 'Job parts done per second by model', unit: 'ops', targets: [{ expr: `sum by (model) (rate(shoal_job_parts_total{outcome="ack"}[${W}]))`, legend: '{{model}}' }] },
    ],
  },
  {
    uid: 'shoal-latency',
    title: 'Shoal / Latency by lane',
    panels: [
      {
        title: 'Request time p50 / p99 by lane (gateway)',
        unit: 's',
        targets: [
          { expr: `histogram_quantile(0.5, sum by (le, lane) (rate(shoal_request_seconds_bucket[${W}])))`, legend: 'p50 {{lane}}' },
          { expr: `histogram_quantile(0.99, sum by (le, lane) (rate(shoal_request_seconds_bucket[${W}])))`, legend: 'p99 {{lane}}' },
        ],
      },
      { title: 'Batch time p99 by lane (workers)', unit: 's', targets: [{ expr: `histogram_quantile(0.99, sum by (le, lane) (rate(shoal_batch_seconds_bucket[${W}])))`, legend: '{{lane}}' }] },
      { title: 'Queue wait p99 by lane', unit: 's', targets: [{ expr: `histogram_quantile(0.99, sum by (le, lane) (rate(shoal_queue_wait_seconds_bucket[${W}])))`, legend: '{{lane}}' }] },
    ],
  },
  {
    uid: 'shoal-batching',
    title: 'Shoal / Batch efficiency',
    panels: [
      {
        title: 'Padding overhead (padded / real tokens - 1) by model',
        unit: 'percentunit',
        targets: [{ expr: `sum by (model) (rate(shoal_batch_tokens_total{kind="padded"}[${W}])) / sum by (model) (rate(shoal_batch_tokens_total{kind="real"}[${W}])) - 1`, legend: '{{model}}' }],
      },
      { title: 'Items per batch by model and lane', unit: 'short', targets: [{ expr: `sum by (model, lane) (rate(shoal_batch_items_total[${W}])) / sum by (model, lane) (rate(shoal_batches_total[${W}]))`, legend: '{{model}} {{lane}}' }] },
      { title: 'Items waiting in the scheduler', unit: 'short', targets: [{ expr: 'sum by (worker) (shoal_queue_items{service="worker"})', legend: '{{worker}}' }] },
    ],
  },
  {
    uid: 'shoal-models',
    title: 'Shoal / Model residency, loads and evictions',
    panels: [
      { title: 'Resident bytes by model', unit: 'bytes', targets: [{ expr: 'sum by (model) (shoal_model_resident_bytes)', legend: '{{model}}' }] },
      { title: 'Pool use (resident / budget) by worker', unit: 'percentunit', targets: [{ expr: 'shoal_pool_resident_bytes{service="worker"} / shoal_pool_budget_bytes{service="worker"}', legend: '{{worker}}' }] },
      { title: 'Pinned (preloaded) models by worker', unit: 'short', targets: [{ expr: 'shoal_pool_pinned_models{service="worker"}', legend: '{{worker}}' }] },
      { title: 'Model loads per minute by model', unit: 'short', targets: [{ expr: `sum by (model) (rate(shoal_model_loads_total[${W}])) * 60`, legend: '{{model}}' }] },
      { title: 'Evictions per minute by reason', unit: 'short', targets: [{ expr: `sum by (reason) (rate(shoal_model_evictions_total[${W}])) * 60`, legend: '{{reason}}' }] },
      { title: 'Load time p90 by family', unit: 's', targets: [{ expr: `histogram_quantile(0.9, sum by (le, family) (rate(shoal_model_load_seconds_bucket[${W}])))`, legend: '{{family}}' }] },
      { title: 'Load failures by code', unit: 'short', targets: [{ expr: `sum by (model, code) (increase(shoal_model_load_failures_total[1h]))`, legend: '{{model}} {{code}}' }] },
    ],
  },
  {
    uid: 'shoal-backlog',
    title: 'Shoal / Queue lag and token backlog',
    panels: [
      { title: 'Token backlog by model (estimated)', unit: 'short', targets: [{ expr: 'max by (model, primitive) (shoal_backlog_tokens)', legend: '{{primitive}} {{model}}' }] },
      { title: 'Item backlog by model', unit: 'short', targets: [{ expr: 'max by (model, primitive) (shoal_backlog_items)', legend: '{{primitive}} {{model}}' }] },
      { title: 'Queued parts by model (= KEDA lag)', unit: 'short', targets: [{ expr: 'max by (model, primitive) (shoal_backlog_parts)', legend: '{{primitive}} {{model}}' }] },
      { title: 'Worker replicas (workers reporting)', unit: 'short', targets: [{ expr: 'count by (job, pool) (shoal_pool_budget_bytes{service="worker"})', legend: '{{job}} {{pool}}' }] },
    ],
  },
  {
    uid: 'shoal-errors',
    title: 'Shoal / Errors and dead letters',
    panels: [
      // Status polls of an unfinished job answer UNAVAILABLE by design (503 until it ends): not errors.
      { title: 'HTTP errors per second by code', unit: 'reqps', targets: [{ expr: `sum by (code) (rate(shoal_requests_total{primitive!="job_read",code!="OK"}[${W}]))`, legend: '{{code}}' }] },
      { title: 'Job part retries and failures by outcome', unit: 'ops', targets: [{ expr: `sum by (model, outcome) (rate(shoal_job_parts_total{outcome=~"nak|term|dead"}[${W}]))`, legend: '{{model}} {{outcome}}' }] },
      { title: 'Dead-lettered parts (last hour)', unit: 'short', targets: [{ expr: 'sum by (model) (increase(shoal_job_parts_total{outcome="dead"}[1h]))', legend: '{{model}}' }] },
      { title: 'Failed batches by code', unit: 'ops', targets: [{ expr: `sum by (model, code) (rate(shoal_batch_failures_total[${W}]))`, legend: '{{model}} {{code}}' }] },
    ],
  },
];

function panelJson(panel: Panel, index: number): Record<string, unknown> {
  return {
    id: index + 1,
    type: 'timeseries',
    title: panel.title,
    datasource: { type: 'prometheus', uid: '${datasource}' },
    gridPos: { h: 8, w: 12, x: (index % 2) * 12, y: Math.floor(index / 2) * 8 },
    fieldConfig: { defaults: { unit: panel.unit }, overrides: [] },
    options: { legend: { displayMode: 'list', placement: 'bottom' }, tooltip: { mode: 'multi' } },
    targets: panel.targets.map((t, k) => ({ refId: String.fromCharCode(65 + k), expr: t.expr, legendFormat: t.legend, datasource: { type: 'prometheus', uid: '${datasource}' } })),
  };
}

export function dashboardJson(dashboard: Dashboard): string {
  const json = {
    uid: dashboard.uid,
    title: dashboard.title,
    tags: ['shoal'],
    timezone: 'browser',
    schemaVersion: 39,
    version: 1,
    refresh: '30s',
    time: { from: 'now-6h', to: 'now' },
    templating: { list: [{ name: 'datasource', type: 'datasource', query: 'prometheus', label: 'Prometheus', current: {} }] },
    panels: dashboard.panels.map(panelJson),
  };
  return `${JSON.stringify(json, null, 2)}\n`;
}

function main(): number {
  const check = process.argv.includes('--check');
  mkdirSync(DASHBOARD_DIR, { recursive: true });
  const outputs = DASHBOARDS.map((dashboard) => [join(DASHBOARD_DIR, `${dashboard.uid}.json`), dashboardJson(dashboard)] as const);
  return writeGenerated(outputs, check, 'run npx tsx deploy/tools/grafana-dashboards.ts');
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) process.exitCode = main();
