import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { jetstreamManager, RetentionPolicy, StorageType } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ingestNames } from '../../adapters/nats/ingest/ingest-store.js';
import { FREE_STORE_SHARES, STREAM_BYTES_CEILING } from '../../adapters/nats/connection/stream-sizing.js';
import { natsNames } from '../../adapters/protocol/subjects.js';
import { COMPONENTS, COMPOSE_MAX_FILE_STORE_GIB, COMPOSE_NATS_CONF, passwordVariable, type Component } from '../../deploy/tools/nats-config.js';
import { NATS_SERVER_BIN, NATS_SERVER_MISSING, freePorts, natsServerAvailable } from '../helpers/nats-server.js';
import { FIXTURE_MODELS_DIR, TINY_MEAN, TINY_NER } from '../helpers/nats-worker.js';
import { SHOAL_BIN } from '../helpers/shoal-cli.js';
import { GO_MISSING, isFailure, renderChart } from './chart.js';
import { alertExpressions, dashboardExpressions, declaredFamilies, familyOf, sampleLabels, selectorLabels, shoalMetricNames } from './metric-names.js';
import { readJsz, sample, sampleSum, spawnShoal, spawnWorker, startShippedNats, type ConfiguredNats, type ShoalProcess, type WorkerProcess } from './processes.js';
import { CLI_FROM_SOURCE } from '../helpers/cli-build.js';

/**
 * The deployment as compose and the chart run it, on this machine: a nats-server running the
 * shipped deploy/nats/nats.conf (only its ports and store folder replaced: its JetStream store
 * limit and the least-privilege users of deploy/nats/permissions.yaml as they are), and `shoal
 * gateway`, `shoal worker --parse` and `shoal sink` as processes, each logged in as its own user
 * with Shoal's default stream limits. A synchronous call, a job and a document ingest go through
 * end to end (so every permission the components need is granted, and the store holds every
 * stream they create), what the users must not do is refused, and every metric a Grafana
 * dashboard or alert rule reads is exported by the running gateway or worker.
 */

const PASSWORDS: Record<Component, string> = { gateway: 'gw-secret', worker: 'wk-secret', sink: 'sk-secret', documents: 'dc-secret', classify: 'cl-secret' };
const userEnv = (c: Component): Record<string, string> => ({ NATS_USER: c, NATS_PASSWORD: PASSWORDS[c] });

describe.skipIf(!natsServerAvailable())(`deployment processes with least-privilege NATS users ${natsServerAvailable() ? '' : NATS_SERVER_MISSING}`, () => {
  // The shipped file is rendered for the default prefix; the server is private to this file.
  const prefix = 'shoal';
  const names = natsNames(prefix);
  const ingest = ingestNames(names);
  const resultsDir = mkdtempSync(join(tmpdir(), 'shoal-sink-'));
  const indexDir = join(mkdtempSync(join(tmpdir(), 'shoal-index-')), 'docs');
  let nats: ConfiguredNats;
  let gateway: ShoalProcess | undefined;
  let worker: WorkerProcess | undefined;
  let sink: ShoalProcess | undefined;
  let gatewayUrl = '';
  let workerMetricsUrl = '';

  beforeAll(async () => {
    nats = await startShippedNats(NATS_SERVER_BIN, readFileSync(COMPOSE_NATS_CONF, 'utf8'), Object.fromEntries(COMPONENTS.map((c) => [passwordVariable(c), PASSWORDS[c]])));
    const [httpPort = 0, metricsPort = 0] = await freePorts(2);
    gatewayUrl = `http://127.0.0.1:${httpPort}`;
    workerMetricsUrl = `http://127.0.0.1:${metricsPort}`;
    // allSettled: whatever did start is stopped in afterAll even when another start failed.
    const [g, w, k] = await Promise.allSettled([
      spawnShoal(['gateway', '--host', '127.0.0.1', '--port', String(httpPort), '--nats', nats.url, '--prefix', prefix], 'shoal gateway listening', { ...userEnv('gateway'), SHOAL_INDEXES: `docs=${indexDir}` }),
      // The parse role creates the ingest topology at start-up, as the worker user.
      spawnWorker({ url: nats.url, prefix, id: 'metered', metricsPort, extraEnv: { ...userEnv('worker'), SHOAL_PARSE: '1' } }),
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
    rmSync(dirname(indexDir), { recursive: true, force: true });
  });

  it("the shipped store limit holds every stream Shoal creates with its defaults, the ingest streams included", async () => {
    // What the code's defaults reserve: a stream with max_bytes reserves it in the server's store
    // when it is created. Unset, each of the three takes a quarter of the free store, at most the
    // ceiling: the shipped store holds four ceilings, so each gets its full size (stream-sizing.ts).
    const reserved = { [names.jobsStream]: STREAM_BYTES_CEILING, [names.resultsStream]: STREAM_BYTES_CEILING, [ingest.stream]: STREAM_BYTES_CEILING };
    const needed = Object.values(reserved).reduce((a, b) => a + b, 0);
    // The limit the server read from the shipped file (nats-server's `GB` is 1024^3).
    const varz = (await (await fetch(`http://127.0.0.1:${nats.monitorPort}/varz`)).json()) as { jetstream?: { config?: { max_storage?: number } } };
    const maxStorage = varz.jetstream?.config?.max_storage ?? 0;
    expect(maxStorage).toBe(COMPOSE_MAX_FILE_STORE_GIB * 1024 ** 3);
    expect(maxStorage, `max_file_store must hold ${FREE_STORE_SHARES} × ${STREAM_BYTES_CEILING / 1024 ** 3} GiB for Shoal's streams to get their full size`).toBeGreaterThanOrEqual(FREE_STORE_SHARES * STREAM_BYTES_CEILING);
    // And the services, started against it with their defaults, created every one of them.
    const nc = await connect({ servers: nats.url, user: 'gateway', pass: PASSWORDS.gateway });
    try {
      const jsm = await jetstreamManager(nc);
      const streams = new Map<string, number>();
      for await (const info of jsm.streams.list()) streams.set(info.config.name, info.config.max_bytes);
      for (const [stream, bytes] of Object.entries(reserved)) expect(streams.get(stream), stream).toBe(bytes);
      for (const stream of [names.deadLetterStream, `${names.jobsStream}_MAX_DELIVERIES`, ingest.advisoryStream, `KV_${names.statusBucket}`, `KV_${ingest.bucket}`, `OBJ_${names.payloadBucket}`]) {
        expect(streams.has(stream), stream).toBe(true);
      }
      // Nothing else reserves store: the sum of the limits is the code's.
      expect([...streams.values()].filter((b) => b > 0).reduce((a, b) => a + b, 0)).toBe(needed);
    } finally {
      await nc.close();
    }
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
      // A worker never purges a stream, nor calls other workers (it may republish job parts and
      // parse tasks: what its shutdown interrupted is handed back, adapters/nats/jobs/requeue.ts).
      await expect(workerNc.request(`${prefix}.rpc.encode.x`, '{}', { timeout: 2000 })).rejects.toThrow(/Permissions Violation for Publish/);
      await expect(workerNc.request(`$JS.API.STREAM.PURGE.OBJ_${names.payloadBucket}`, '{}', { timeout: 2000 })).rejects.toThrow(/Permissions Violation for Publish/);
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

  it('ingests documents through the gateway and a parse worker, each as its own user, with no permission refused', async () => {
    const serverLogBefore = nats.log().length;
    const sources = [
      { id: 'n1', text: 'The pilot boat leaves the harbour at dawn.' },
      { id: 'n2', text: 'Apple trees blossom in the orchard in spring.' },
    ];
    const submitted = await fetch(`${gatewayUrl}/v1/ingest`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ index: 'docs', model: TINY_MEAN, sources, job_id: 'deployingest' }),
    });
    expect(submitted.status, await submitted.clone().text()).toBe(202);
    const status = async (): Promise<{ state?: string; documents?: { ok: number; failed: number } }> => (await (await fetch(`${gatewayUrl}/v1/jobs/deployingest`)).json()) as { state?: string };
    await expect.poll(async () => (await status()).state, { timeout: 45_000, interval: 250 }).toBe('completed');
    expect((await status()).documents).toMatchObject({ ok: 2, failed: 0 });
    // The parse tasks went through the shared parse consumer (the worker parsed them) and the rows are searchable.
    const jsz = await readJsz(nats.monitorPort, ingest.stream);
    expect(jsz?.lastSeq).toBe(2);
    expect(jsz?.consumers.find((c) => c.name === ingest.parseConsumer)).toMatchObject({ num_pending: 0, num_ack_pending: 0, delivered: { stream_seq: 2 } });
    const search = await fetch(`${gatewayUrl}/v1/search`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ query: sources[1]?.text, index: 'docs', k: 1 }) });
    expect(((await search.json()) as { hits: Array<{ source: string }> }).hits[0]?.source).toBe('n2');
    // A permission the run lacked would show as a violation in the server's log, even where the
    // code retries or swallows it: none may show (the gateway deletes the run's document bytes
    // from the object store, a filtered purge it alone is allowed).
    const unexpected = (log: string): string[] => log.split('\n').filter((line) => /Violation/i.test(line));
    expect(unexpected(nats.log().slice(serverLogBefore))).toEqual([]);
    for (const [who, log] of [['gateway', gateway?.log() ?? ''], ['worker', worker?.log() ?? '']] as const) expect(unexpected(log), who).toEqual([]);
  }, 60_000);

  it('grants the ingest topology to the gateway, parse, document and classify workers only (the last two create it with theirs), and parse tasks to the first two only', async () => {
    // Each JetStream API subject probed with a request the server answers with an API error
    // (an empty body): answered = the user may publish there; a permissions violation = refused.
    const mayPublish = async (nc: NatsConnection, subject: string): Promise<boolean> =>
      nc.request(subject, '{}', { timeout: 2000 }).then(
        () => true,
        (error: unknown) => {
          if (/Permissions Violation/.test(String(error))) return false;
          throw error;
        },
      );
    const api = {
      createIngest: `$JS.API.STREAM.CREATE.${ingest.stream}`,
      createAdvisories: `$JS.API.STREAM.CREATE.${ingest.advisoryStream}`,
      createBucket: `$JS.API.STREAM.CREATE.KV_${ingest.bucket}`,
      deleteTask: `$JS.API.STREAM.MSG.DELETE.${ingest.stream}`,
      deleteJobPart: `$JS.API.STREAM.MSG.DELETE.${names.jobsStream}`,
      updateIngest: `$JS.API.STREAM.UPDATE.${ingest.stream}`,
      purgeIngest: `$JS.API.STREAM.PURGE.${ingest.stream}`,
      deleteIngest: `$JS.API.STREAM.DELETE.${ingest.stream}`,
    };
    const expected: Record<Component, Record<keyof typeof api, boolean>> = {
      // The coordinator: creates the topology on its first run, removes poison tasks it dead-letters.
      gateway: { createIngest: true, createAdvisories: true, createBucket: true, deleteTask: true, deleteJobPart: false, updateIngest: false, purgeIngest: false, deleteIngest: false },
      worker: { createIngest: true, createAdvisories: true, createBucket: true, deleteTask: true, deleteJobPart: true, updateIngest: false, purgeIngest: false, deleteIngest: false },
      sink: { createIngest: false, createAdvisories: false, createBucket: false, deleteTask: false, deleteJobPart: false, updateIngest: false, purgeIngest: false, deleteIngest: false },
      // Record document or run status in the ingest bucket, as the parse role does, and set up the
      // ingest topology with their own (a fresh server's first one creates it); parse no parse tasks.
      documents: { createIngest: true, createAdvisories: true, createBucket: true, deleteTask: false, deleteJobPart: false, updateIngest: false, purgeIngest: false, deleteIngest: false },
      classify: { createIngest: true, createAdvisories: true, createBucket: true, deleteTask: false, deleteJobPart: false, updateIngest: false, purgeIngest: false, deleteIngest: false },
    };
    for (const component of COMPONENTS) {
      const nc = await connect({ servers: nats.url, user: component, pass: PASSWORDS[component] });
      try {
        const granted: Record<string, boolean> = {};
        for (const [name, subject] of Object.entries(api)) granted[name] = await mayPublish(nc, subject);
        expect(granted, component).toEqual(expected[component]);
        // Parse tasks come from coordinators (the gateway published them in the test above), and
        // from workers only to hand back a task their shutdown interrupted; never from the sink, a document or a classify worker.
        if (component === 'sink' || component === 'documents' || component === 'classify') await expect(nc.request(ingest.parseSubject, '{}', { timeout: 2000 }), component).rejects.toThrow(/Permissions Violation for Publish/);
        if (component === 'sink') await expect(nc.request(`$KV.${ingest.bucket}.doc.x.1`, '{}', { timeout: 2000 })).rejects.toThrow(/Permissions Violation for Publish/);
      } finally {
        await nc.close();
      }
    }
    // The probes changed nothing: the ingest stream still holds the two tasks' sequence numbers and its configuration.
    const nc = await connect({ servers: nats.url, user: 'gateway', pass: PASSWORDS.gateway });
    try {
      const info = await (await jetstreamManager(nc)).streams.info(ingest.stream);
      expect(info.state.last_seq).toBe(2);
      expect(info.config.retention).toBe(RetentionPolicy.Workqueue);
      expect(info.config.storage).toBe(StorageType.File);
    } finally {
      await nc.close();
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
      env: { ...process.env, ...userEnv('worker'), NATS_URL: nats.url, SHOAL_SUBJECT_PREFIX: prefix, SHOAL_MODELS: TINY_NER, SHOAL_FROM_SOURCE: CLI_FROM_SOURCE, MALLOC_TRIM_THRESHOLD_: '0', SHOAL_LOG_LEVEL: 'warn' },
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
