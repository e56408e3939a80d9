import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { natsNames } from '../../adapters/protocol/subjects.js';
import { COMPONENTS, authorizationBlock, loadPermissions, passwordVariable, type Component } from '../../deploy/tools/nats-config.js';
import { NATS_SERVER_BIN, NATS_SERVER_MISSING, freePort, natsServerAvailable } from '../helpers/nats-server.js';
import { FIXTURE_MODELS_DIR, TINY_MEAN, TINY_NER, uniquePrefix } from '../helpers/nats-worker.js';
import { SHOAL_BIN } from '../helpers/shoal-cli.js';
import { GO_MISSING, isFailure, renderChart } from './chart.js';
import { alertExpressions, dashboardExpressions, declaredFamilies, familyOf, sampleLabels, selectorLabels, shoalMetricNames } from './metric-names.js';
import { readJsz, sample, sampleSum, spawnShoal, spawnWorker, startConfiguredNats, type ConfiguredNats, type ShoalProcess, type WorkerProcess } from './processes.js';

/**
 * The deployment as compose and the chart run it, on this machine: a nats-server with the
 * least-privilege users of deploy/nats/permissions.yaml, and `shoal gateway`, `shoal worker` and
 * `shoal sink` as processes, each logged in as its own user. A synchronous call and a job go
 * through end to end (so every permission the components need is granted), what the users must
 * not do is refused, and every metric a Grafana dashboard or alert rule reads is exported by the
 * running gateway or worker.
 */

const PASSWORDS: Record<Component, string> = { gateway: 'gw-secret', worker: 'wk-secret', sink: 'sk-secret' };
const userEnv = (c: Component): Record<string, string> => ({ NATS_USER: c, NATS_PASSWORD: PASSWORDS[c] });

describe.skipIf(!natsServerAvailable())(`deployment processes with least-privilege NATS users ${natsServerAvailable() ? '' : NATS_SERVER_MISSING}`, () => {
  const prefix = uniquePrefix('deploy');
  const names = natsNames(prefix);
  const resultsDir = mkdtempSync(join(tmpdir(), 'shoal-sink-'));
  let nats: ConfiguredNats;
  let gateway: ShoalProcess | undefined;
  let worker: WorkerProcess | undefined;
  let sink: ShoalProcess | undefined;
  let gatewayUrl = '';
  let workerMetricsUrl = '';

  beforeAll(async () => {
    const conf = `max_payload: 1MB\n${authorizationBlock(loadPermissions(), prefix, passwordVariable)}`;
    nats = await startConfiguredNats(NATS_SERVER_BIN, conf, Object.fromEntries(COMPONENTS.map((c) => [passwordVariable(c), PASSWORDS[c]])));
    const httpPort = await freePort();
    const metricsPort = await freePort();
    gatewayUrl = `http://127.0.0.1:${httpPort}`;
    workerMetricsUrl = `http://127.0.0.1:${metricsPort}`;
    // allSettled: whatever did start is stopped in afterAll even when another start failed.
    const [g, w, k] = await Promise.allSettled([
      spawnShoal(['gateway', '--host', '127.0.0.1', '--port', String(httpPort), '--nats', nats.url, '--prefix', prefix], 'shoal gateway listening', userEnv('gateway')),
      spawnWorker({ url: nats.url, prefix, id: 'metered', metricsPort, extraEnv: userEnv('worker') }),
      spawnShoal(['sink', '--dir', resultsDir, '--nats', nats.url, '--prefix', prefix], 'shoal sink writing results', userEnv('sink')),
    ]);
    if (g.status === 'fulfilled') gateway = g.value;
    if (w.status === 'fulfilled') worker = w.value;
    if (k.status === 'fulfilled') sink = k.value;
    for (const started of [g, w, k]) if (started.status === 'rejected') throw started.reason;
  }, 60_000);

  afterAll(async () => {
    await Promise.all([gateway?.stop(), worker?.stop(), sink?.stop()]);
    await nats?.stop();
    rmSync(resultsDir, { recursive: true, force: true });
  });

  it('serves a synchronous call and a job end to end, with results written by the sink', async () => {
    const encode = await fetch(`${gatewayUrl}/v1/encode`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: TINY_MEAN, items: ['hello'] }) });
    expect(encode.status).toBe(200);
    const items = Array.from({ length: 40 }, (_, i) => ({ id: `d${i}`, text: `document number ${i}` }));
    const submitted = await fetch(`${gatewayUrl}/v1/jobs`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ job_id: 'deployjob', primitive: 'encode', request: { model: TINY_MEAN, items }, part_items: 10 }),
    });
    expect(submitted.status, await submitted.clone().text()).toBe(202);
    await expect
      .poll(async () => ((await (await fetch(`${gatewayUrl}/v1/jobs/deployjob`)).json()) as { state?: string }).state, { timeout: 30_000, interval: 200 })
      .toBe('completed');
    const jobDir = join(resultsDir, 'deployjob');
    await expect.poll(() => (readdirSync(resultsDir).includes('deployjob') ? readdirSync(jobDir).filter((f) => f.endsWith('.jsonl')).length : 0), { timeout: 15_000 }).toBe(4);
    const lines = readdirSync(jobDir)
      .filter((f) => f.endsWith('.jsonl'))
      .flatMap((f) => readFileSync(join(jobDir, f), 'utf8').split('\n').filter((l) => l !== ''));
    expect(lines.map((l) => (JSON.parse(l) as { id: string }).id).sort()).toEqual(items.map((i) => i.id).sort());
  }, 60_000);

  it('refuses what a component user must not do', async () => {
    const as = (c: Component): Promise<NatsConnection> => connect({ servers: nats.url, user: c, pass: PASSWORDS[c] });
    const gatewayNc = await as('gateway');
    try {
      const jsm = await jetstreamManager(gatewayNc);
      await expect(jsm.streams.delete(names.jobsStream)).rejects.toThrow(/Permissions Violation/);
      await expect(jsm.streams.purge(names.resultsStream)).rejects.toThrow(/Permissions Violation/);
      expect((await jsm.streams.info(names.jobsStream)).config.name).toBe(names.jobsStream);
      // Only workers publish results: a forged one from the gateway user is refused.
      await expect(gatewayNc.request(names.results('deployjob', 0), '{}', { timeout: 2000 })).rejects.toThrow(/Permissions Violation for Publish/);
    } finally {
      await gatewayNc.close();
    }
    const sinkNc = await as('sink');
    try {
      const jsm = await jetstreamManager(sinkNc);
      // The sink publishes nothing: a job part from it is refused by the server, and never stored.
      const before = (await jsm.streams.info(names.jobsStream)).state.last_seq;
      await expect(sinkNc.request(`${prefix}.jobs.encode.${TINY_MEAN}`, '{}', { timeout: 2000 })).rejects.toThrow(/Permissions Violation for Publish/);
      expect((await jsm.streams.info(names.jobsStream)).state.last_seq).toBe(before);
    } finally {
      await sinkNc.close();
    }
    const workerNc = await as('worker');
    try {
      // A worker never submits jobs.
      await expect(workerNc.request(`${prefix}.jobs.encode.${TINY_MEAN}`, '{}', { timeout: 2000 })).rejects.toThrow(/Permissions Violation for Publish/);
    } finally {
      await workerNc.close();
    }
    await expect(connect({ servers: nats.url, user: 'worker', pass: 'wrong' })).rejects.toThrow(/Authorization/i);
  }, 30_000);

  it('exports every metric the dashboards and alert rules read', async () => {
    const gatewayText = await (await fetch(`${gatewayUrl}/metrics`)).text();
    const workerText = await (await fetch(`${workerMetricsUrl}/metrics`)).text();
    const families = new Set([...declaredFamilies(gatewayText).keys(), ...declaredFamilies(workerText).keys()]);
    const used = [...dashboardExpressions(), ...alertExpressions()];
    expect(used.length).toBeGreaterThanOrEqual(25);
    const missing = used.flatMap(({ where, expr }) => shoalMetricNames(expr).filter((n) => familyOf(n, families) === null).map((n) => `${where}: ${n}`));
    expect(missing).toEqual([]);
    // Label names in selectors ({kind="padded"}, {outcome="ack"}, {service="worker"}...) exist on
    // the series, wherever the traffic produced samples of that metric.
    const seen = sampleLabels(`${gatewayText}\n${workerText}`);
    const wrongLabels = used.flatMap(({ where, expr }) =>
      selectorLabels(expr).flatMap(({ metric, labels }) => {
        const present = seen.get(metric);
        return present === undefined ? [] : labels.filter((l) => !present.has(l)).map((l) => `${where}: ${metric}{${l}}`);
      }),
    );
    expect(wrongLabels).toEqual([]);
    // The traffic above produced real samples for the core series, not only declarations.
    expect(sample(workerText, 'shoal_job_parts_total', { model: TINY_MEAN, outcome: 'ack' })).toBe(4);
    // 40 job items in the bulk lane, 1 synchronous item in the interactive lane.
    expect(sampleSum(workerText, 'shoal_batch_items_total', { model: TINY_MEAN, lane: 'bulk' })).toBe(40);
    expect(sampleSum(workerText, 'shoal_batch_items_total', { model: TINY_MEAN })).toBe(41);
    expect(sample(gatewayText, 'shoal_requests_total', { primitive: 'encode', model: TINY_MEAN, code: 'OK' })).toBe(1);
    expect(sample(gatewayText, 'shoal_backlog_parts', { primitive: 'encode', model: TINY_MEAN })).toBe(0);
    // The compose health checks hit routes these processes serve.
    for (const [url, path] of [[gatewayUrl, '/readyz'], [workerMetricsUrl, '/readyz'], [gatewayUrl, '/healthz'], [workerMetricsUrl, '/healthz']] as const) {
      expect((await fetch(`${url}${path}`)).status, `${url}${path}`).toBe(200);
    }
  }, 30_000);

  it.skipIf(GO_MISSING !== null)("a pool at zero: the gateway takes jobs only for existing consumers, which the chart's bootstrap Job creates", async () => {
    await worker?.stop();
    worker = undefined;
    const submit = (model: string): Promise<Response> =>
      fetch(`${gatewayUrl}/v1/jobs`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ primitive: 'extract', request: { model, items: ['Ada Lovelace lived in London.'] } }),
      });
    // No worker runs and none ever served tiny-ner: refused, so nothing would wake its pool.
    expect((await submit(TINY_NER)).status).toBe(404);
    // The bootstrap script exactly as the chart renders it (image path replaced by this checkout).
    const rendered = renderChart([]);
    if (isFailure(rendered)) throw new Error(rendered.stderr);
    const job = rendered.manifests.find((m) => m.kind === 'Job' && m.metadata.name === 'shoal-consumers-text') as unknown as {
      spec: { template: { spec: { containers: Array<{ command: string[]; args: string[] }> } } };
    };
    const container = job.spec.template.spec.containers[0];
    expect(container?.command).toEqual(['/bin/sh', '-c']);
    const script = (container?.args[0] ?? '').replaceAll('node /app/bin/shoal.js', `${process.execPath} ${SHOAL_BIN} --model-dir ${FIXTURE_MODELS_DIR} --threads 1`);
    const run = await promisify(execFile)('/bin/sh', ['-c', script], {
      timeout: 45_000,
      env: { ...process.env, ...userEnv('worker'), NATS_URL: nats.url, SHOAL_SUBJECT_PREFIX: prefix, SHOAL_MODELS: TINY_NER, SHOAL_FROM_SOURCE: '1', MALLOC_TRIM_THRESHOLD_: '0', SHOAL_LOG_LEVEL: 'warn' },
    });
    expect(run.stderr).not.toMatch(/"level":(50|60)/);
    // The bootstrap worker is gone (it drained) and the consumer stays: the job is taken, for KEDA to wake the pool.
    const accepted = await submit(TINY_NER);
    expect(accepted.status).toBe(202);
    const jsz = await readJsz(nats.monitorPort, names.jobsStream);
    const consumer = jsz?.consumers.find((c) => c.name === names.consumer('extract', TINY_NER));
    expect(consumer === undefined ? null : consumer.num_pending + consumer.num_ack_pending).toBe(1);
  }, 60_000);
});
