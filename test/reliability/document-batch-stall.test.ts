import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jetstream, type JetStreamClient } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ShoalMetrics } from '../../adapters/observability/metrics.js';
import type { FollowedRun } from '../../pipelines/documents/document-producer.js';
import { resolveWorkerConfig } from '../../services/worker/config.js';
import { ShoalWorker } from '../../services/worker/worker.js';
import { capturingLogger } from '../helpers/capturing-logger.js';
import { runOneDocument } from '../helpers/document-run.js';
import { startFreezingRelay, type FreezingRelay } from '../helpers/freezing-relay.js';
import { eventually, natsServerAvailable, NATS_SERVER_MISSING, startNatsServer, type NatsServerHandle } from '../helpers/nats-server.js';
import { TINY_MEAN, startTestWorker, testConnection, testWorkerConfig } from '../helpers/nats-worker.js';
import { startPgliteServer, type PgliteServerHandle } from '../helpers/pglite-server.js';

/**
 * A documents worker's batch waits on something that never answers: an index whose replies stop
 * coming (PGlite behind a TCP relay the test freezes; the statement timeout set to a day, as for
 * a hang nobody foresaw). Before the stall limit, the batch held its jobs for ever (the keep-alive
 * extended their ack wait while it "worked"). Now, after SHOAL_DOCUMENTS_STALL_MS without
 * progress, its jobs go back for another delivery and its slot is freed: the document, stalled on
 * every delivery, fails TIMEOUT and is dead-lettered after SHOAL_MAX_DELIVER deliveries, and the
 * same worker commits later documents once the index answers again.
 */

const STALL_MS = 1_500;
const MAX_DELIVER = 2;

describe.skipIf(!natsServerAvailable())('a documents batch that stops making progress', () => {
  let server: NatsServerHandle;
  let postgres: PgliteServerHandle;
  let relay: FreezingRelay;
  let root: string;
  let nc: NatsConnection;
  let js: JetStreamClient;
  const workers: ShoalWorker[] = [];
  const metrics = new ShoalMetrics();
  const log = capturingLogger();

  beforeAll(async () => {
    server = await startNatsServer();
    postgres = await startPgliteServer();
    relay = await startFreezingRelay(postgres.port);
    root = await mkdtemp(join(tmpdir(), 'shoal-batch-stall-'));
    await mkdir(join(root, 'pipelines'));
    await writeFile(join(root, 'pipelines', 'tiny.yaml'), `name: tiny\nstages:\n  encode:\n    model: ${TINY_MEAN}\n`);
    workers.push(await startTestWorker(server.url, 'shoal'));
    const documents = testWorkerConfig(server.url, 'shoal', {
      models: [],
      documents: true,
      documentPipelines: ['tiny'],
      pipelinesDir: join(root, 'pipelines'),
      indexes: { docs: relay.url('?table=stalled&query_timeout=86400000') },
      documentStallMs: STALL_MS,
      consumer: { ackWaitMs: 5_000, maxDeliver: MAX_DELIVER },
    });
    workers.push(await ShoalWorker.start(resolveWorkerConfig(documents), { logger: log.logger, metrics }));
    nc = await testConnection(server.url);
    js = jetstream(nc);
  }, 60_000);

  afterAll(async () => {
    // First the relay: statements still waiting on it fail (connection closed), so nothing hangs the close.
    await relay?.stop();
    await Promise.all(workers.map((worker) => worker.close().catch(() => undefined)));
    await nc?.close();
    await postgres?.stop();
    await server?.stop();
    await rm(root, { recursive: true, force: true });
  }, 30_000);

  const run = (runId: string, doc: string): Promise<FollowedRun> => runOneDocument(nc, { runId, doc, source: { id: doc, text: `The text of ${doc}.` }, pipeline: 'tiny', index: 'docs' }, 60_000);

  const stalledBatches = async (): Promise<number> => (await metrics.documentBatchesStalled.get()).values[0]?.value ?? 0;

  it(natsServerAvailable() ? 'hands a stalled batch\'s jobs back, fails the document TIMEOUT after its deliveries, and goes on with new jobs' : NATS_SERVER_MISSING, async () => {
    // The index answers: the table is made and a document committed.
    const before = await run('stall-before', 'first');
    expect(before.end).toMatchObject({ state: 'completed', documents: { ok: 1 } });
    expect(await stalledBatches()).toBe(0);

    // The index stops answering: each delivery's batch stalls and is given up.
    relay.freeze();
    const started = Date.now();
    const during = await run('stall-during', 'stuck');
    expect(during.events).toHaveLength(1);
    expect(during.events[0]).toMatchObject({ doc: 'stuck', state: 'failed', code: 'TIMEOUT' });
    expect(during.events[0]?.reason).toContain(`delivered ${MAX_DELIVER + 1} times without finishing`);
    expect(during.end).toMatchObject({ state: 'failed' });
    // Two deliveries stalled (the third ended the document without touching the index).
    expect(await stalledBatches()).toBe(MAX_DELIVER);
    expect(Date.now() - started).toBeGreaterThanOrEqual(MAX_DELIVER * STALL_MS);
    const warnings = log.lines().filter((line) => typeof line.msg === 'string' && line.msg.includes('showed no progress'));
    expect(warnings).toHaveLength(MAX_DELIVER);
    expect(warnings[0]).toMatchObject({ level: 50, documents: 1, stallMs: STALL_MS });
    await eventually(async () => {
      const info = await (await js.streams.get('SHOAL_DLQ')).info(false, { subjects_filter: 'shoal.dlq.documents.tiny' });
      expect(info.state.messages).toBe(1);
    }, 20_000);
    const dead = await (await js.streams.get('SHOAL_DLQ')).getMessage({ last_by_subj: 'shoal.dlq.documents.tiny' });
    expect(dead?.header.get('Shoal-Dead-Code')).toBe('TIMEOUT');

    // The index answers again: the same worker, its slots free, commits a new document.
    relay.thaw();
    const after = await run('stall-after', 'later');
    expect(after.events[0]).toMatchObject({ doc: 'later', state: 'committed', chunks: 1 });
    expect(workers[1]?.state).toBe('running');
  }, 90_000);
});
