import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SETTINGS, type SettingSpec, type SettingUser } from '../../services/settings/table.js';
import { DISPOSITIONS } from '../../adapters/nats/jobs/part-handler.js';
import { NATS_SERVER_MISSING, eventually, freePorts, natsServerAvailable, startNatsServer, type NatsServerHandle } from '../helpers/nats-server.js';
import { TINY_CROSS, TINY_MEAN } from '../helpers/nats-worker.js';
import { REPO_ROOT } from '../helpers/shared.js';
import { CHART_DIR, GO_MISSING, isFailure, renderChart, type Manifest, type Rendered } from './chart.js';
import { alertExpressions, dashboardExpressions } from './metric-names.js';
import { problemsOf, readExpositions, registeredLabels, type QueryContext } from './metric-queries.js';
import { sample, spawnShoal, spawnWorker, type ShoalProcess, type WorkerProcess } from './processes.js';

/**
 * Every PromQL expression the deployment ships (Grafana dashboards, alert rules, the chart's KEDA
 * Prometheus triggers) read against real /metrics scrapes of a gateway, a worker and a results
 * sink after a little traffic: each series exists under its exposed name (_total, _bucket...),
 * rate()/increase() only on counters and histograms, histogram_quantile() only over buckets, every
 * label a selector or a by/on list names is on the series (or added by Prometheus in both compose
 * and the chart's ServiceMonitor), every enumerated label value is one the code produces. Also:
 * the labels Prometheus adds are the same in compose and Kubernetes, and every variable the
 * deployment sets on a Shoal container is a setting of services/settings/table.ts for that role.
 */

const COMPOSE_PROMETHEUS = join(REPO_ROOT, 'deploy', 'prometheus', 'prometheus.yml');
/** Target labels Prometheus itself sets, and those the Prometheus Operator sets on a ServiceMonitor's targets. */
const PROMETHEUS_TARGET_LABELS = ['job', 'instance'];
const OPERATOR_TARGET_LABELS = [...PROMETHEUS_TARGET_LABELS, 'namespace', 'service', 'pod', 'container', 'endpoint'];

interface Endpoint {
  port: string;
  relabelings?: Array<{ sourceLabels?: string[]; targetLabel?: string }>;
  metricRelabelings?: Array<{ sourceLabels?: string[]; targetLabel?: string; action?: string; regex?: string }>;
}

function composeTargetLabels(): Set<string> {
  const config = parse(readFileSync(COMPOSE_PROMETHEUS, 'utf8')) as { scrape_configs: Array<{ job_name: string; static_configs: Array<{ labels?: Record<string, string> }> }> };
  const shoal = config.scrape_configs.filter((c) => c.job_name.startsWith('shoal-'));
  // A label counts when every Shoal worker target has it (pool is on the workers only, which is where it is used).
  const labels = shoal.flatMap((c) => c.static_configs.flatMap((s) => Object.keys(s.labels ?? {})));
  return new Set([...PROMETHEUS_TARGET_LABELS, ...labels]);
}

function serviceMonitorEndpoints(rendered: Rendered): Endpoint[] {
  const monitor = rendered.manifests.find((m) => m.kind === 'ServiceMonitor') as (Manifest & { spec: { endpoints: Endpoint[] } }) | undefined;
  if (monitor === undefined) throw new Error('the aws overlay renders no ServiceMonitor');
  return monitor.spec.endpoints;
}

const rendered = GO_MISSING === null ? renderChart([join(CHART_DIR, 'values-aws.yaml')]) : null;
const aws = rendered === null || isFailure(rendered) ? null : rendered;

function kedaQueries(): Array<{ where: string; expr: string }> {
  return (aws?.manifests ?? [])
    .filter((m) => m.kind === 'ScaledObject')
    .flatMap((m) =>
      (m as unknown as { spec: { triggers: Array<{ type: string; metadata: Record<string, string> }> } }).spec.triggers
        .filter((t) => t.type === 'prometheus')
        .map((t) => ({ where: `ScaledObject ${m.metadata.name}`, expr: t.metadata.query ?? '' })),
    );
}

/** Labels every Shoal target gets from Prometheus in both compose and the chart (the aws overlay's ServiceMonitor). */
function targetLabels(): Set<string> {
  const compose = composeTargetLabels();
  if (aws === null) return compose;
  for (const endpoint of serviceMonitorEndpoints(aws)) {
    const k8s = new Set([...OPERATOR_TARGET_LABELS, ...(endpoint.relabelings ?? []).flatMap((r) => (r.targetLabel === undefined ? [] : [r.targetLabel]))]);
    for (const label of compose) if (!k8s.has(label)) compose.delete(label);
  }
  return compose;
}

describe.skipIf(!natsServerAvailable())(`dashboards, alert rules and KEDA queries against the services' real /metrics ${natsServerAvailable() ? '' : NATS_SERVER_MISSING}`, () => {
  const resultsDir = mkdtempSync(join(tmpdir(), 'shoal-queries-sink-'));
  let nats: NatsServerHandle | undefined;
  const started: Array<ShoalProcess | WorkerProcess> = [];
  const texts: Record<'gateway' | 'worker' | 'sink', string> = { gateway: '', worker: '', sink: '' };
  let context: QueryContext;

  beforeAll(async () => {
    nats = await startNatsServer();
    const [httpPort = 0, workerPort = 0, sinkPort = 0] = await freePorts(3);
    const gatewayUrl = `http://127.0.0.1:${httpPort}`;
    const starts = await Promise.allSettled([
      spawnShoal(['gateway', '--host', '127.0.0.1', '--port', String(httpPort), '--nats', nats.url], 'shoal gateway listening'),
      spawnWorker({ url: nats.url, prefix: 'shoal', id: 'queries', models: [TINY_MEAN, TINY_CROSS], metricsPort: workerPort }),
      spawnShoal(['sink', '--dir', resultsDir, '--nats', nats.url, '--metrics-port', String(sinkPort)], 'shoal sink writing results'),
    ]);
    for (const s of starts) if (s.status === 'fulfilled') started.push(s.value);
    for (const s of starts) if (s.status === 'rejected') throw s.reason;
    const post = (path: string, body: unknown): Promise<Response> => fetch(`${gatewayUrl}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    // Both lanes, two primitives, an error code, a job read back: series with samples, not only declarations.
    expect((await post('/v1/encode', { model: TINY_MEAN, items: ['hello'] })).status).toBe(200);
    expect((await post('/v1/score', { model: TINY_CROSS, query: 'q', items: ['a', 'b'] })).status).toBe(200);
    expect((await post('/v1/encode', { model: 'no-such-model', items: ['x'] })).status).toBe(404);
    expect((await post('/v1/jobs', { job_id: 'queries', primitive: 'encode', request: { model: TINY_MEAN, items: ['a', 'b', 'c', 'd'] }, part_items: 2 })).status).toBe(202);
    await eventually(async () => {
      const state = ((await (await fetch(`${gatewayUrl}/v1/jobs/queries`)).json()) as { state?: string }).state;
      if (state !== 'completed') throw new Error(`job queries is ${String(state)}`);
    }, 20_000);
    texts.gateway = await (await fetch(`${gatewayUrl}/metrics`)).text();
    texts.worker = await (await fetch(`http://127.0.0.1:${workerPort}/metrics`)).text();
    texts.sink = await (await fetch(`http://127.0.0.1:${sinkPort}/metrics`)).text();
    context = { exposition: readExpositions(Object.values(texts)), registered: registeredLabels(), targetLabels: targetLabels() };
  }, 60_000);

  afterAll(async () => {
    await Promise.all(started.map((p) => p.stop()));
    await nats?.stop();
    rmSync(resultsDir, { recursive: true, force: true });
  });

  it('every query reads series the services export, with functions that fit their types and labels and values that exist', () => {
    const queries = [...dashboardExpressions(), ...alertExpressions(), ...kedaQueries()];
    expect(queries.length).toBeGreaterThanOrEqual(30);
    // values-aws.yaml: a token-backlog trigger per model and primitive of its two pools.
    if (GO_MISSING === null) expect(kedaQueries().length).toBe(4);
    const problems = queries.flatMap(({ where, expr }) => problemsOf(expr, context).map((p) => `${where}: ${p}`));
    expect(problems).toEqual([]);
  });

  it('the check bites: wrong names, types, labels and values are reported', () => {
    const cases: Array<[string, RegExp]> = [
      ['sum(rate(shoal_request_total[5m]))', /no such series/],
      ['histogram_quantile(0.9, sum by (le) (rate(shoal_requests_total[5m])))', /not a histogram's _bucket/],
      ['histogram_quantile(0.9, sum by (le) (shoal_request_seconds_bucket))', /raw buckets/],
      ['rate(shoal_queue_items[5m])', /rate\(\) of a gauge/],
      ['deriv(shoal_batches_total[5m])', /deriv\(\) of a counter/],
      ['shoal_request_seconds', /a histogram has no series/],
      ['sum(rate(shoal_job_parts_total{outcome="acked"}[5m]))', /outcome="acked" is never exported/],
      ['sum(rate(shoal_requests_total{code!~"OK|INVALID_IMPUT"}[5m]))', /code="INVALID_IMPUT"/],
      ['sum(rate(shoal_batch_items_total{priority="bulk"}[5m]))', /no label priority/],
      ['sum by (worker) (rate(shoal_requests_total[5m]))', /by \(worker\)/],
      ['count by (job, pool) (shoal_pool_budget_bytes{service="workers"})', /service="workers"/],
      ['frobnicate(shoal_queue_items)', /unknown PromQL function/],
    ];
    for (const [expr, expected] of cases) {
      let problems: string[];
      try {
        problems = problemsOf(expr, context);
      } catch (error) {
        problems = [String(error)];
      }
      expect(problems.join('\n'), expr).toMatch(expected);
    }
  });

  it('a worker exports every job part outcome of every model it serves from the start, so increase() sees the first dead letter', () => {
    for (const [primitive, model] of [['encode', TINY_MEAN], ['score', TINY_CROSS]] as const) {
      for (const outcome of DISPOSITIONS) expect(sample(texts.worker, 'shoal_job_parts_total', { primitive, model, outcome }), `${primitive} ${model} ${outcome}`).not.toBeNull();
    }
    expect(sample(texts.worker, 'shoal_job_parts_total', { primitive: 'encode', model: TINY_MEAN, outcome: 'dead' })).toBe(0);
    expect(sample(texts.worker, 'shoal_job_parts_total', { primitive: 'encode', model: TINY_MEAN, outcome: 'ack' })).toBe(2);
  });
});

describe('the labels Prometheus adds, and the variables the deployment sets', () => {
  it.skipIf(GO_MISSING !== null)("the chart's ServiceMonitor keeps Shoal's `service` label and adds the pool, as compose's Prometheus does", () => {
    if (aws === null) throw new Error(rendered !== null && isFailure(rendered) ? rendered.stderr : 'not rendered');
    const queries = [...dashboardExpressions(), ...alertExpressions()];
    // The queries select on service="worker"...: the Operator's own `service` target label would
    // move Shoal's to exported_service unless the metric relabelings put it back.
    expect(queries.some((q) => /service="/.test(q.expr))).toBe(true);
    const endpoints = serviceMonitorEndpoints(aws);
    expect(endpoints.map((e) => e.port).sort()).toEqual(['http', 'metrics']);
    for (const endpoint of endpoints) {
      expect(endpoint.metricRelabelings).toEqual(
        expect.arrayContaining([expect.objectContaining({ sourceLabels: ['exported_service'], targetLabel: 'service' }), expect.objectContaining({ action: 'labeldrop', regex: 'exported_service' })]),
      );
      // The pool comes from the worker pods' label shoal.dev/pool (Prometheus' sanitized meta label).
      expect(endpoint.relabelings).toContainEqual(expect.objectContaining({ sourceLabels: ['__meta_kubernetes_pod_label_shoal_dev_pool'], targetLabel: 'pool' }));
    }
    const workerPods = aws.manifests.filter((m) => m.kind === 'Deployment' && m.metadata.labels?.['shoal.dev/pool'] !== undefined) as unknown as Array<{ spec: { template: { metadata: { labels: Record<string, string> } } } }>;
    expect(workerPods.length).toBeGreaterThanOrEqual(2);
    for (const pod of workerPods) expect(pod.spec.template.metadata.labels['shoal.dev/pool']).toBeDefined();
    // And the labels the dashboards use beyond Shoal's own are set in both deployments.
    expect([...targetLabels()].sort()).toEqual(['instance', 'job', 'pool']);
  });

  const byEnv = new Map<string, readonly SettingUser[]>((Object.values(SETTINGS) as SettingSpec[]).flatMap((s) => s.env.map((e) => [e, s.usedBy] as const)));
  const unknownFor = (role: string, names: readonly string[]): string[] =>
    names.filter((name) => {
      const usedBy = byEnv.get(name);
      return usedBy === undefined || !usedBy.some((u) => u === 'all' || u === role);
    });

  it('compose sets on each Shoal service only settings of the table that its role reads', () => {
    const compose = parse(readFileSync(join(REPO_ROOT, 'docker-compose.yml'), 'utf8'), { merge: true }) as { services: Record<string, { command?: string[]; environment?: Record<string, string> }> };
    const shoal = Object.entries(compose.services).filter(([, s]) => ['gateway', 'worker', 'sink'].includes(s.command?.[0] ?? ''));
    expect(shoal.length).toBe(4);
    for (const [name, service] of shoal) expect(unknownFor(service.command?.[0] ?? '', Object.keys(service.environment ?? {})), name).toEqual([]);
  });

  it.skipIf(GO_MISSING !== null)('the chart sets on each container only settings of the table that its role reads', () => {
    for (const overlay of [[], [join(CHART_DIR, 'values-laptop.yaml')], [join(CHART_DIR, 'values-aws.yaml')]]) {
      const result = renderChart(overlay);
      if (isFailure(result)) throw new Error(result.stderr);
      for (const manifest of result.manifests.filter((m) => m.kind === 'Deployment' || m.kind === 'Job')) {
        const containers = (manifest as unknown as { spec: { template: { spec: { containers: Array<{ args: string[]; env: Array<{ name: string }> }> } } } }).spec.template.spec.containers;
        for (const container of containers) {
          // The consumer-bootstrap Job runs `shoal worker` from a shell script.
          const role = ['gateway', 'worker', 'sink'].find((r) => container.args[0] === r || (container.args[0] ?? '').includes(`shoal.js ${r}`)) ?? 'unknown';
          expect(unknownFor(role, container.env.map((e) => e.name)), `${overlay.join(',') || 'defaults'}: ${manifest.metadata.name}`).toEqual([]);
        }
      }
    }
  });
});
