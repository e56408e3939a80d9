import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AckPolicy, DeliverPolicy, jetstream, jetstreamManager, RetentionPolicy, StorageType } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ingestNames } from '../../adapters/nats/ingest/ingest-store.js';
import { natsNames } from '../../adapters/protocol/subjects.js';
import { COMPONENTS, COMPOSE_NATS_CONF, passwordVariable, type Component } from '../../deploy/tools/nats-config.js';
import { NATS_SERVER_BIN, NATS_SERVER_MISSING, natsServerAvailable } from '../helpers/nats-server.js';
import { GO_MISSING, isFailure, renderChart } from './chart.js';
import { documentNames } from './document-names.js';
import { readJsz, spawnWorker, startShippedNats, type ConfiguredNats } from './processes.js';

/**
 * The `documents` user of deploy/nats/permissions.yaml (document workers, `shoal worker
 * --documents`) on a nats-server running the shipped deploy/nats/nats.conf: the document topology
 * created as the chart's bootstrap Job has a document worker create it (work-queue stream
 * <P>_DOCUMENTS, one durable pull consumer per pipeline, the runs stream and consumer, the events
 * stream), document jobs and a run opened by the gateway user, pulled and acked as the documents
 * user, events published, encode jobs and tokenize calls sent, with no permission violation; the
 * chart's KEDA triggers read the lag of exactly these consumers; and what each user may and may
 * not publish on the document subjects (these with the JetStream client, the calls the worker
 * makes). And a real `shoal worker --documents` started first on a fresh server, as the documents
 * user, creates its topology and the ingest one it sets up with it, with no violation.
 */

const PASSWORDS: Record<Component, string> = { gateway: 'gw-secret', worker: 'wk-secret', sink: 'sk-secret', documents: 'dc-secret', classify: 'cl-secret' };
const PREFIX = 'shoal';
const PIPELINES = ['documents', 'legal_v2'];
const ACK_WAIT_MS = 60_000;
const MAX_DELIVER = 5;

describe.skipIf(!natsServerAvailable())(`the documents NATS user on the shipped nats.conf ${natsServerAvailable() ? '' : NATS_SERVER_MISSING}`, () => {
  const names = documentNames(PREFIX);
  let nats: ConfiguredNats;
  const as = (c: Component): Promise<NatsConnection> => connect({ servers: nats.url, user: c, pass: PASSWORDS[c] });

  beforeAll(async () => {
    nats = await startShippedNats(NATS_SERVER_BIN, readFileSync(COMPOSE_NATS_CONF, 'utf8'), Object.fromEntries(COMPONENTS.map((c) => [passwordVariable(c), PASSWORDS[c]])));
  }, 30_000);

  afterAll(async () => {
    await nats?.stop();
  });

  it('creates the document topology, takes document jobs and a run from the gateway, and submits, calls and reports, with no violation', async () => {
    const logBefore = nats.log().length;
    const documents = await as('documents');
    const gateway = await as('gateway');
    try {
      const jsm = await jetstreamManager(documents);
      await jsm.streams.add({ name: names.stream, subjects: [names.subjects], retention: RetentionPolicy.Workqueue, storage: StorageType.File });
      await jsm.streams.add({ name: names.runsStream, subjects: [names.runOpen], storage: StorageType.File });
      await jsm.streams.add({ name: names.eventsStream, subjects: [names.events], storage: StorageType.File });
      const consumer = { ack_policy: AckPolicy.Explicit, deliver_policy: DeliverPolicy.All, ack_wait: ACK_WAIT_MS * 1_000_000, max_deliver: MAX_DELIVER };
      for (const pipeline of PIPELINES) await jsm.consumers.add(names.stream, { ...consumer, durable_name: names.consumer(pipeline), filter_subject: names.subject(pipeline) });
      await jsm.consumers.add(names.runsStream, { ...consumer, durable_name: names.runsConsumer, filter_subject: names.runOpen });

      // The gateway opens a run and submits three documents to the first pipeline, one to the second.
      const gatewayJs = jetstream(gateway);
      await gatewayJs.publish(names.runOpen, JSON.stringify({ run: 'r1' }));
      for (let i = 0; i < 3; i++) await gatewayJs.publish(names.subject('documents'), JSON.stringify({ run: 'r1', doc: i }));
      await gatewayJs.publish(names.subject('legal_v2'), JSON.stringify({ run: 'r1', doc: 3 }));
      // What KEDA reads for each trigger: lag = num_pending + num_ack_pending of the named consumer.
      const lag = async (stream: string, name: string): Promise<number | null> => {
        const found = (await readJsz(nats.monitorPort, stream))?.consumers.find((c) => c.name === name);
        return found === undefined ? null : found.num_pending + found.num_ack_pending;
      };
      expect(await lag(names.stream, names.consumer('documents'))).toBe(3);
      expect(await lag(names.stream, names.consumer('legal_v2'))).toBe(1);
      expect(await lag(names.runsStream, names.runsConsumer)).toBe(1);

      // The document worker pulls and acks as its own user, submits an encode job part and a
      // tokenize call (no JetStream jobs stream and no model worker here: answered "no responders",
      // not refused), and publishes the run's events.
      const js = jetstream(documents);
      const pulled: string[] = [];
      const waiting: Array<[string, string, number]> = [
        [names.stream, names.consumer('documents'), 3],
        [names.stream, names.consumer('legal_v2'), 1],
        [names.runsStream, names.runsConsumer, 1],
      ];
      for (const [stream, name, count] of waiting) {
        const c = await js.consumers.get(stream, name);
        const batch = await c.fetch({ max_messages: count, expires: 5000 });
        const messages = [];
        for await (const m of batch) messages.push(m);
        for (const m of messages) {
          pulled.push(m.subject);
          m.ack();
        }
      }
      expect(pulled.sort()).toEqual([names.runOpen, names.subject('documents'), names.subject('documents'), names.subject('documents'), names.subject('legal_v2')].sort());
      await expect.poll(() => lag(names.stream, names.consumer('documents')), { timeout: 5000 }).toBe(0);
      await expect.poll(() => lag(names.runsStream, names.runsConsumer), { timeout: 5000 }).toBe(0);
      await js.publish(`${PREFIX}.events.r1.document`, JSON.stringify({ run: 'r1', doc: 0, state: 'indexed' }));
      for (const subject of [`${PREFIX}.jobs.encode.tiny-bert-mean`, `${PREFIX}.rpc.serving.tokenize.tiny-bert-mean`]) {
        await expect(documents.request(subject, '{}', { timeout: 2000 })).rejects.toThrow(/503|no responders/i);
      }
      // The work queue is empty once acked; the consumers keep the ack wait and deliveries set.
      expect((await jsm.streams.info(names.stream)).state.messages).toBe(0);
      const info = await jsm.consumers.info(names.stream, names.consumer('legal_v2'));
      expect(info.config).toMatchObject({ ack_wait: ACK_WAIT_MS * 1_000_000, max_deliver: MAX_DELIVER, filter_subject: `${PREFIX}.documents.legal_5Fv2` });
      expect((await jsm.streams.info(names.eventsStream)).state.messages).toBe(1);
    } finally {
      await documents.close();
      await gateway.close();
    }
    const violations = nats.log().slice(logBefore).split('\n').filter((line) => /Violation/i.test(line));
    expect(violations).toEqual([]);
  }, 30_000);

  it.skipIf(GO_MISSING !== null)("the chart's KEDA triggers name exactly the consumers that exist", async () => {
    const overlay = join(mkdtempSync(join(tmpdir(), 'shoal-documents-')), 'documents.yaml');
    writeFileSync(overlay, JSON.stringify({ documents: { enabled: true, pipelines: PIPELINES } }));
    const withDocuments = renderChart([overlay]);
    if (isFailure(withDocuments)) throw new Error(withDocuments.stderr);
    const scaled = withDocuments.manifests.find((m) => m.kind === 'ScaledObject' && m.metadata.name === 'shoal-documents') as unknown as { spec: { triggers: Array<{ metadata: Record<string, string> }> } };
    const existing = new Set<string>();
    for (const stream of [names.stream, names.runsStream]) for (const c of (await readJsz(nats.monitorPort, stream))?.consumers ?? []) existing.add(`${stream}/${c.name}`);
    expect(scaled.spec.triggers.map((t) => `${t.metadata.stream ?? ''}/${t.metadata.consumer ?? ''}`).sort()).toEqual([...existing].sort());
    expect(existing.size).toBe(PIPELINES.length + 1);
  });

  it('grants the document topology and subjects to the gateway and document workers only, and to each its own part', async () => {
    // Answered (an API error, a PubAck or "no responders") = the user may publish there; a
    // permissions violation = refused. Probes with an empty body change nothing they may reach.
    const mayPublish = async (nc: NatsConnection, subject: string): Promise<boolean> =>
      nc.request(subject, '{}', { timeout: 2000 }).then(
        () => true,
        (error: unknown) => {
          if (/Permissions Violation/.test(String(error))) return false;
          if (/503|no responders/i.test(String(error))) return true;
          throw error;
        },
      );
    const probes = {
      createDocuments: `$JS.API.STREAM.CREATE.${names.stream}`,
      createRuns: `$JS.API.STREAM.CREATE.${names.runsStream}`,
      createEvents: `$JS.API.STREAM.CREATE.${names.eventsStream}`,
      createAdvisories: `$JS.API.STREAM.CREATE.${names.stream}_MAX_DELIVERIES`,
      updateDocuments: `$JS.API.STREAM.UPDATE.${names.stream}`,
      deleteDocumentJob: `$JS.API.STREAM.MSG.DELETE.${names.stream}`,
      submitDocument: names.subject('probe'),
      openRun: names.runOpen,
      publishEvent: `${PREFIX}.events.probe`,
      submitJobPart: `${PREFIX}.jobs.encode.probe`,
      callWorkers: `${PREFIX}.rpc.serving.tokenize.probe`,
      publishResult: `${PREFIX}.results.probe.0`,
      deadLetterDocument: `${PREFIX}.dlq.documents.probe`,
      purgeDocuments: `$JS.API.STREAM.PURGE.${names.stream}`,
      deleteDocuments: `$JS.API.STREAM.DELETE.${names.stream}`,
    };
    const none = Object.fromEntries(Object.keys(probes).map((k) => [k, false])) as Record<keyof typeof probes, boolean>;
    const expected: Record<Component, Record<keyof typeof probes, boolean>> = {
      // Opens runs, submits documents (creating their streams if it comes first), submits jobs, calls workers.
      gateway: { ...none, createDocuments: true, createRuns: true, createEvents: true, submitDocument: true, openRun: true, submitJobPart: true, callWorkers: true },
      // Model workers: hand back job parts, publish results and dead letters; no part in documents.
      worker: { ...none, submitJobPart: true, publishResult: true, deadLetterDocument: true },
      sink: none,
      documents: {
        ...none,
        createDocuments: true,
        createRuns: true,
        createEvents: true,
        createAdvisories: true,
        deleteDocumentJob: true,
        submitDocument: true,
        publishEvent: true,
        submitJobPart: true,
        callWorkers: true,
        deadLetterDocument: true,
      },
      // Classify workers: submit encode jobs and call the pools, as document workers do; no part in documents.
      classify: { ...none, submitJobPart: true, callWorkers: true },
    };
    for (const component of COMPONENTS) {
      const nc = await as(component);
      try {
        const granted: Record<string, boolean> = {};
        for (const [name, subject] of Object.entries(probes)) granted[name] = await mayPublish(nc, subject);
        expect(granted, component).toEqual(expected[component]);
      } finally {
        await nc.close();
      }
    }
    // Nobody deleted or purged anything: the streams and their configuration are as created.
    const nc = await as('gateway');
    try {
      const info = await (await jetstreamManager(nc)).streams.info(names.stream);
      expect(info.config.retention).toBe(RetentionPolicy.Workqueue);
      expect(info.config.storage).toBe(StorageType.File);
      expect(info.state.last_seq).toBeGreaterThanOrEqual(4);
    } finally {
      await nc.close();
    }
  }, 60_000);
});

describe.skipIf(!natsServerAvailable())(`a document worker on a fresh server with the shipped nats.conf ${natsServerAvailable() ? '' : NATS_SERVER_MISSING}`, () => {
  // A server of its own: the test above creates the streams by hand, with other settings than the worker's.
  let nats: ConfiguredNats;

  beforeAll(async () => {
    nats = await startShippedNats(NATS_SERVER_BIN, readFileSync(COMPOSE_NATS_CONF, 'utf8'), Object.fromEntries(COMPONENTS.map((c) => [passwordVariable(c), PASSWORDS[c]])));
  }, 30_000);

  afterAll(async () => {
    await nats?.stop();
  });

  it('starts as the documents user before anything else ran (as the chart\'s bootstrap Job starts one), creates its topology and the ingest one, and stops, with no violation', async () => {
    const names = documentNames(PREFIX);
    // `shoal worker --documents` as the Deployment and the bootstrap Job run it: no model of its own, the documents user.
    const worker = await spawnWorker({
      url: nats.url,
      prefix: PREFIX,
      id: 'documents-first',
      models: [],
      ackWaitMs: ACK_WAIT_MS,
      extraEnv: { NATS_USER: 'documents', NATS_PASSWORD: PASSWORDS.documents, SHOAL_DOCUMENTS: '1', SHOAL_DOCUMENT_PIPELINES: PIPELINES.join(',') },
    });
    const stopped = await worker.stop();
    expect(stopped.code, worker.log().slice(-2000)).toBe(0);
    const consumers = new Set<string>();
    for (const stream of [names.stream, names.runsStream]) for (const c of (await readJsz(nats.monitorPort, stream))?.consumers ?? []) consumers.add(`${stream}/${c.name}`);
    expect([...consumers].sort()).toEqual([...PIPELINES.map((p) => `${names.stream}/${names.consumer(p)}`), `${names.runsStream}/${names.runsConsumer}`].sort());
    // The ingest topology came with it: the bucket the document ledger writes.
    const nc = await connect({ servers: nats.url, user: 'documents', pass: PASSWORDS.documents });
    try {
      const jsm = await jetstreamManager(nc);
      await expect(jsm.streams.info(`KV_${ingestNames(natsNames(PREFIX)).bucket}`)).resolves.toBeDefined();
    } finally {
      await nc.close();
    }
    expect(nats.log().split('\n').filter((line) => /Violation/i.test(line))).toEqual([]);
    expect(worker.log()).not.toMatch(/Permissions Violation/);
  }, 60_000);
});
