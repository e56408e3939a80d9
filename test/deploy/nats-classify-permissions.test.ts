import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { AckPolicy, jetstream, jetstreamManager, RetentionPolicy } from '@nats-io/jetstream';
import { Objm } from '@nats-io/obj';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ingestNames } from '../../adapters/nats/ingest/ingest-store.js';
import { classifyJobNames } from '../../adapters/protocol/classify-jobs.js';
import { DEAD_LETTER_HEADERS } from '../../adapters/protocol/jobs.js';
import { natsNames } from '../../adapters/protocol/subjects.js';
import { COMPONENTS, COMPOSE_NATS_CONF, passwordVariable, type Component } from '../../deploy/tools/nats-config.js';
import { freePort, NATS_SERVER_BIN, NATS_SERVER_MISSING, natsServerAvailable } from '../helpers/nats-server.js';
import { CLI_FROM_SOURCE } from '../helpers/cli-build.js';
import { TINY_MEAN } from '../helpers/nats-worker.js';
import { SHOAL_BIN } from '../helpers/shoal-cli.js';
import { GO_MISSING, isFailure, renderChart, type Rendered } from './chart.js';
import { readJsz, spawnShoal, spawnWorker, startShippedNats, type ConfiguredNats, type ShoalProcess, type WorkerProcess } from './processes.js';

/**
 * The `classify` user of deploy/nats/permissions.yaml (classify workers, `shoal worker
 * --classify`) on a nats-server running the shipped deploy/nats/nats.conf, with real processes
 * each logged in as its own user: the chart's classify bootstrap Job, its script and variables as
 * rendered, run first on the fresh server, creates the classification topology and the ingest one
 * its worker sets up with it (without the chart renderer, the classify worker started first does);
 * a gateway with SHOAL_CLASSIFY_JOBS=1 (as the chart runs it with
 * classify.enabled) publishes a POST /v1/classify job, a model worker encodes, the classify
 * worker classifies, counts, assembles and deletes its chunk objects, and the gateway streams the
 * results; a message that is no chunk is dead-lettered by the classify user; no permission
 * violation on the way. The chart's KEDA trigger reads the lag of exactly the consumer that
 * exists, and what each user may and may not publish on the classification subjects is probed.
 */

const PASSWORDS: Record<Component, string> = { gateway: 'gw-secret', worker: 'wk-secret', sink: 'sk-secret', documents: 'dc-secret', classify: 'cl-secret' };
const userEnv = (c: Component): Record<string, string> => ({ NATS_USER: c, NATS_PASSWORD: PASSWORDS[c] });
const PREFIX = 'shoal';
const ACK_WAIT_MS = 60_000;
const TAXONOMY = '1 - Apparel\n2 - Apparel > Shoes\n3 - Electronics\n4 - Electronics > Phones\n5 - Home\n6 - Home > Kitchen';
const WORDS = ['running shoes', 'a smartphone', 'kitchen knife', 'leather boots', 'phone charger', 'frying pan'];
// Two chunks of Shoal's default 256 products.
const PRODUCTS = Array.from({ length: 300 }, (_, i) => ({ id: `p${i}`, text: `${WORDS[i % WORDS.length] ?? ''} ${i}` }));

function renderWithClassify(): Rendered {
  const overlay = join(mkdtempSync(join(tmpdir(), 'shoal-classify-')), 'classify.yaml');
  writeFileSync(overlay, JSON.stringify({ nats: { subjectPrefix: PREFIX }, classify: { enabled: true } }));
  const rendered = renderChart([overlay]);
  if (isFailure(rendered)) throw new Error(rendered.stderr);
  return rendered;
}

/**
 * The classify bootstrap Job as the chart renders it: its script (the image's CLI path replaced by
 * this checkout's) with its variables (the password its Secret would give, this server's URL, and
 * the cache folders, which are volumes in the pod, in a temporary folder). Its stderr.
 */
async function runBootstrapJob(rendered: Rendered, url: string): Promise<string> {
  const job = rendered.manifests.find((m) => m.kind === 'Job' && m.metadata.name === 'shoal-classify-consumers') as unknown as {
    spec: { template: { spec: { containers: Array<{ command: string[]; args: string[]; env: Array<{ name: string; value?: string }> }> } } };
  };
  const container = job.spec.template.spec.containers[0];
  expect(container?.command).toEqual(['/bin/sh', '-c']);
  const cache = mkdtempSync(join(tmpdir(), 'shoal-classify-cache-'));
  try {
    const env: Record<string, string> = Object.fromEntries((container?.env ?? []).flatMap((e) => (e.value === undefined ? [] : [[e.name, e.value]])));
    Object.assign(env, { NATS_URL: url, NATS_PASSWORD: PASSWORDS.classify, SHOAL_CACHE_DIR: join(cache, 'shoal'), HF_HOME: join(cache, 'hf') });
    const script = (container?.args[0] ?? '').replaceAll('node /app/bin/shoal.js', `${process.execPath} ${SHOAL_BIN}`);
    const run = await promisify(execFile)('/bin/sh', ['-c', script], { timeout: 45_000, env: { ...process.env, ...env, SHOAL_FROM_SOURCE: CLI_FROM_SOURCE, MALLOC_TRIM_THRESHOLD_: '0' } });
    return run.stderr;
  } finally {
    rmSync(cache, { recursive: true, force: true });
  }
}

describe.skipIf(!natsServerAvailable())(`the classify NATS user on the shipped nats.conf ${natsServerAvailable() ? '' : NATS_SERVER_MISSING}`, () => {
  const names = natsNames(PREFIX);
  const classify = classifyJobNames(names);
  const ingest = ingestNames(names);
  let nats: ConfiguredNats;
  let classifyWorker: WorkerProcess | undefined;
  let modelWorker: WorkerProcess | undefined;
  let gateway: ShoalProcess | undefined;
  let gatewayUrl = '';
  let bootstrapLog: string | null = null;
  const as = (c: Component): Promise<NatsConnection> => connect({ servers: nats.url, user: c, pass: PASSWORDS[c] });
  const violations = (from = 0): string[] =>
    nats
      .log()
      .slice(from)
      .split('\n')
      .filter((line) => /Violation/i.test(line));

  beforeAll(async () => {
    nats = await startShippedNats(NATS_SERVER_BIN, readFileSync(COMPOSE_NATS_CONF, 'utf8'), Object.fromEntries(COMPONENTS.map((c) => [passwordVariable(c), PASSWORDS[c]])));
    // First and alone: the chart's bootstrap Job, then the worker as the Deployment runs it (no model, the classify user, its ack wait).
    if (GO_MISSING === null) bootstrapLog = await runBootstrapJob(renderWithClassify(), nats.url);
    classifyWorker = await spawnWorker({ url: nats.url, prefix: PREFIX, id: 'classify-1', models: [], ackWaitMs: ACK_WAIT_MS, extraEnv: { ...userEnv('classify'), SHOAL_CLASSIFY: '1', SHOAL_MAX_DELIVER: '5' } });
    const httpPort = await freePort();
    gatewayUrl = `http://127.0.0.1:${httpPort}`;
    const [w, g] = await Promise.allSettled([
      spawnWorker({ url: nats.url, prefix: PREFIX, id: 'encoder-1', extraEnv: userEnv('worker') }),
      spawnShoal(['gateway', '--host', '127.0.0.1', '--port', String(httpPort), '--nats', nats.url, '--prefix', PREFIX], 'shoal gateway listening', { ...userEnv('gateway'), SHOAL_CLASSIFY_JOBS: '1' }),
    ]);
    if (w.status === 'fulfilled') modelWorker = w.value;
    if (g.status === 'fulfilled') gateway = g.value;
    for (const started of [w, g]) if (started.status === 'rejected') throw started.reason;
  }, 90_000);

  afterAll(async () => {
    await Promise.all([gateway?.stop(), modelWorker?.stop(), classifyWorker?.stop()]);
    await nats?.stop();
  }, 60_000);

  it("the chart's bootstrap Job (or the classify worker) started first on a fresh server creates the classification topology and the ingest one as the classify user, with no violation", async () => {
    if (bootstrapLog !== null) {
      // It started a classify worker, waited for its /readyz, and stopped it: no error on the way.
      expect(bootstrapLog).toContain('"worker started"');
      expect(bootstrapLog).not.toMatch(/"level":(50|60)/);
    }
    const nc = await as('classify');
    try {
      const jsm = await jetstreamManager(nc);
      const stream = await jsm.streams.info(classify.stream);
      expect(stream.config).toMatchObject({ subjects: [classify.allSubjects()], retention: RetentionPolicy.Workqueue });
      const consumer = await jsm.consumers.info(classify.stream, classify.consumer);
      // The worker's ack wait; no server-side max deliveries (the worker counts them: SHOAL_MAX_DELIVER).
      expect(consumer.config).toMatchObject({ durable_name: classify.consumer, filter_subject: classify.allSubjects(), ack_policy: AckPolicy.Explicit, ack_wait: ACK_WAIT_MS * 1_000_000, max_deliver: -1 });
      for (const created of [ingest.stream, ingest.advisoryStream, `KV_${ingest.bucket}`, names.jobsStream, `OBJ_${names.payloadBucket}`]) await expect(jsm.streams.info(created), created).resolves.toBeDefined();
    } finally {
      await nc.close();
    }
    expect(violations()).toEqual([]);
    expect(classifyWorker?.log()).not.toMatch(/Permissions Violation/);
  });

  it.skipIf(GO_MISSING !== null)("the chart's KEDA trigger names exactly the consumer that exists", async () => {
    const scaled = renderWithClassify().manifests.find((m) => m.kind === 'ScaledObject' && m.metadata.name === 'shoal-classify') as unknown as { spec: { triggers: Array<{ metadata: Record<string, string> }> } };
    const existing = ((await readJsz(nats.monitorPort, classify.stream))?.consumers ?? []).map((c) => `${c.stream_name}/${c.name}`);
    expect(scaled.spec.triggers.map((t) => `${t.metadata.stream ?? ''}/${t.metadata.consumer ?? ''}`)).toEqual(existing);
    expect(existing).toEqual([`${classify.stream}/${classify.consumer}`]);
  });

  it('runs a POST /v1/classify job through the gateway, a model worker and the classify worker, each as its own user, with no violation', async () => {
    const logBefore = nats.log().length;
    const submitted = await fetch(`${gatewayUrl}/v1/classify`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: TINY_MEAN, items: PRODUCTS, taxonomy: TAXONOMY, top_k: 2, job_id: 'deploy-classify', mode: 'job' }),
    });
    expect(submitted.status, await submitted.clone().text()).toBe(202);
    const state = async (): Promise<{ state?: string; chunks?: number; items_done?: number }> => (await (await fetch(`${gatewayUrl}/v1/jobs/deploy-classify`)).json()) as { state?: string };
    await expect.poll(async () => (await state()).state, { timeout: 60_000, interval: 250 }).toBe('completed');
    expect(await state()).toMatchObject({ chunks: 2, items_done: PRODUCTS.length });
    const results = await fetch(`${gatewayUrl}/v1/jobs/deploy-classify/results`);
    expect(results.status).toBe(200);
    const lines = (await results.text())
      .split('\n')
      .filter((line) => line !== '')
      .map((line) => JSON.parse(line) as { id: string; category?: unknown });
    expect(lines.map((line) => line.id)).toEqual(PRODUCTS.map((p) => p.id));
    expect(lines.every((line) => line.category !== undefined)).toBe(true);
    // The chunks' lines were deleted from the payload object store once the results were written:
    // marked deleted, and their data purged (a filtered purge, refused to a user without it).
    const nc = await as('gateway');
    try {
      const store = await new Objm(nc).open(names.payloadBucket);
      const jsm = await jetstreamManager(nc);
      for (const chunk of [0, 1]) {
        const info = await store.info(classify.chunkObject('deploy-classify', chunk));
        expect(info?.deleted, `chunk ${chunk}`).toBe(true);
        // null: no message left on the object's chunk subject.
        expect(await jsm.streams.getMessage(`OBJ_${names.payloadBucket}`, { last_by_subj: `$O.${names.payloadBucket}.C.${info?.nuid ?? ''}` }), `chunk ${chunk}`).toBeNull();
      }
      expect((await store.info(classify.resultsObject('deploy-classify')))?.deleted).toBe(false);
    } finally {
      await nc.close();
    }
    expect(classifyWorker?.log()).toContain('classification run completed');
    expect(violations(logBefore)).toEqual([]);
    for (const [who, log] of [['classify', classifyWorker?.log() ?? ''], ['worker', modelWorker?.log() ?? ''], ['gateway', gateway?.log() ?? '']] as const) expect(log, who).not.toMatch(/Permissions Violation/);
  }, 90_000);

  it('dead-letters a message that is no chunk to <prefix>.dlq.classify as the classify user, with no violation', async () => {
    const logBefore = nats.log().length;
    const nc = await as('gateway');
    try {
      const jsm = await jetstreamManager(nc);
      await jetstream(nc).publish(classify.chunks, 'not a chunk');
      // The dead letter: the body as it was, why, and where it came from.
      const dead = async (): Promise<string | null> => {
        const m = await jsm.streams.getMessage(names.deadLetterStream, { last_by_subj: classify.deadLetter });
        return m === null ? null : `${m.header.get(DEAD_LETTER_HEADERS.code)} ${m.header.get(DEAD_LETTER_HEADERS.subject)} ${m.string()}`;
      };
      await expect.poll(dead, { timeout: 15_000, interval: 200 }).toBe(`INVALID_INPUT ${classify.chunks} not a chunk`);
      await expect.poll(async () => (await jsm.streams.info(classify.stream)).state.messages, { timeout: 5_000 }).toBe(0);
    } finally {
      await nc.close();
    }
    expect(violations(logBefore)).toEqual([]);
  }, 30_000);

  it('grants the classification topology and subjects to the gateway and classify workers only, and to each its own part', async () => {
    // Answered (an API error, a PubAck or "no responders") = the user may publish there; a
    // permissions violation = refused. Probes change nothing they may reach: an empty body, and
    // a purge of the payload store filtered to a subject that holds nothing.
    const mayPublish = async (nc: NatsConnection, subject: string, body: string): Promise<boolean> =>
      nc.request(subject, body, { timeout: 2000 }).then(
        () => true,
        (error: unknown) => {
          if (/Permissions Violation/.test(String(error))) return false;
          if (/503|no responders/i.test(String(error))) return true;
          throw error;
        },
      );
    const probes = {
      createClassify: `$JS.API.STREAM.CREATE.${classify.stream}`,
      updateClassify: `$JS.API.STREAM.UPDATE.${classify.stream}`,
      publishChunk: classify.chunks,
      publishEnd: classify.end,
      deleteChunk: `$JS.API.STREAM.MSG.DELETE.${classify.stream}`,
      deadLetterClassify: classify.deadLetter,
      runStatus: `$KV.${ingest.bucket}.classify.probe`,
      submitJobPart: `${PREFIX}.jobs.encode.probe`,
      callWorkers: `${PREFIX}.rpc.serving.encode.probe`,
      publishResult: `${PREFIX}.results.probe.0`,
      purgePayloads: `$JS.API.STREAM.PURGE.OBJ_${names.payloadBucket}`,
      purgeClassify: `$JS.API.STREAM.PURGE.${classify.stream}`,
      deleteClassify: `$JS.API.STREAM.DELETE.${classify.stream}`,
    };
    const bodies: Partial<Record<keyof typeof probes, string>> = { purgePayloads: JSON.stringify({ filter: `$O.${names.payloadBucket}.C.probe-holds-nothing` }) };
    const none = Object.fromEntries(Object.keys(probes).map((k) => [k, false])) as Record<keyof typeof probes, boolean>;
    const expected: Record<Component, Record<keyof typeof probes, boolean>> = {
      // Publishes runs (creating the stream if it comes first) and records them; submits jobs, calls workers; deletes ingest bytes.
      gateway: { ...none, createClassify: true, publishChunk: true, publishEnd: true, runStatus: true, submitJobPart: true, callWorkers: true, purgePayloads: true },
      // Model workers: hand back job parts, publish results and dead letters (dlq.>), record parse status; no part in classification.
      worker: { ...none, deadLetterClassify: true, runStatus: true, submitJobPart: true, publishResult: true },
      sink: none,
      // Document workers: their status in the same bucket, encode jobs and calls; no part in classification.
      documents: { ...none, runStatus: true, submitJobPart: true, callWorkers: true },
      // Create their topology, count chunks in the run's status, encode and rerank through the
      // pools, dead-letter what is no chunk, delete chunk objects; never publish chunks or results.
      classify: { ...none, createClassify: true, deadLetterClassify: true, runStatus: true, submitJobPart: true, callWorkers: true, purgePayloads: true },
    };
    for (const component of COMPONENTS) {
      const nc = await as(component);
      try {
        const granted: Record<string, boolean> = {};
        for (const [name, subject] of Object.entries(probes) as Array<[keyof typeof probes, string]>) granted[name] = await mayPublish(nc, subject, bodies[name] ?? '{}');
        expect(granted, component).toEqual(expected[component]);
      } finally {
        await nc.close();
      }
    }
    // Nobody deleted or purged anything: the stream keeps its configuration, the results object is still there.
    const nc = await as('gateway');
    try {
      expect((await (await jetstreamManager(nc)).streams.info(classify.stream)).config.retention).toBe(RetentionPolicy.Workqueue);
      expect((await (await new Objm(nc).open(names.payloadBucket)).info(classify.resultsObject('deploy-classify')))?.deleted).toBe(false);
    } finally {
      await nc.close();
    }
  }, 60_000);
});
