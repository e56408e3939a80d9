import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { jetstream, type JetStreamClient } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DocumentProducer } from '../../pipelines/documents/document-producer.js';
import type { ShoalWorker } from '../../services/worker/worker.js';
import { eventually, natsServerAvailable, NATS_SERVER_MISSING, startNatsServer, type NatsServerHandle } from '../helpers/nats-server.js';
import { TINY_MEAN, startTestWorker, testConnection } from '../helpers/nats-worker.js';

/**
 * What a documents worker does with jobs that cannot succeed, each ending its document with a
 * reason instead of stopping the worker or circling for ever: a message that is not a job goes to
 * the dead-letter stream with the reason in its headers; a job naming an unknown index or pipeline,
 * published on another pipeline's subject, or pointing at a file outside the worker's roots ends
 * `failed` with its code; the run, announced, ends `partial`; a good document beside them is committed.
 */

describe.skipIf(!natsServerAvailable())('document jobs that cannot succeed', () => {
  let server: NatsServerHandle;
  let root: string;
  let nc: NatsConnection;
  let js: JetStreamClient;
  const workers: ShoalWorker[] = [];

  beforeAll(async () => {
    server = await startNatsServer();
    root = await mkdtemp(join(tmpdir(), 'shoal-docjobs-poison-'));
    await mkdir(join(root, 'pipelines'));
    await mkdir(join(root, 'allowed'));
    await writeFile(join(root, 'pipelines', 'tiny.yaml'), `name: tiny\nstages:\n  encode:\n    model: ${TINY_MEAN}\n`);
    await writeFile(join(root, 'outside.txt'), 'A file outside the worker roots.');
    workers.push(await startTestWorker(server.url, 'shoal'));
    workers.push(await startTestWorker(server.url, 'shoal', { models: [], documents: true, documentPipelines: ['tiny', 'ghost'], pipelinesDir: join(root, 'pipelines'), indexes: { docs: join(root, 'index') }, fileRoots: [join(root, 'allowed')] }));
    nc = await testConnection(server.url);
    js = jetstream(nc);
  }, 60_000);

  afterAll(async () => {
    await Promise.all(workers.map((worker) => worker.close().catch(() => undefined)));
    await nc?.close();
    await server?.stop();
    await rm(root, { recursive: true, force: true });
  }, 30_000);

  it(natsServerAvailable() ? 'ends each bad job with its reason, dead-letters what is not a job, and ends the run partial' : NATS_SERVER_MISSING, async () => {
    const runId = 'poison-run';
    const job = (doc: string, fields: Record<string, unknown>): string => JSON.stringify({ v: 1, run_id: runId, doc, source: { id: doc, text: `text of ${doc}` }, pipeline: 'tiny', index: 'docs', submitted_at: new Date().toISOString(), ...fields });
    await js.publish('shoal.documents.tiny', 'not json at all', { msgID: 'poison-1' });
    await js.publish('shoal.documents.tiny', JSON.stringify({ v: 1, run_id: runId, doc: 'x', sauce: {} }), { msgID: 'poison-2' });
    await js.publish('shoal.documents.tiny', job('good', {}));
    await js.publish('shoal.documents.tiny', job('no-index', { index: 'nowhere' }));
    await js.publish('shoal.documents.tiny', job('other-subject', { pipeline: 'ghost' }));
    await js.publish('shoal.documents.ghost', job('no-pipeline', { pipeline: 'ghost' }));
    await js.publish('shoal.documents.tiny', job('outside', { source: { uri: pathToFileURL(join(root, 'outside.txt')).href } }));
    const producer = await DocumentProducer.open(nc);
    await producer.announce(runId, 5, 'tiny', 'docs');
    const followed = await producer.follow(runId, { signal: AbortSignal.timeout(60_000) });
    producer.close();
    const byDoc = new Map(followed.events.map((event) => [event.doc, event]));
    expect(byDoc.get('good')).toMatchObject({ state: 'committed', chunks: 1 });
    expect(byDoc.get('no-index')).toMatchObject({ state: 'failed', code: 'NOT_FOUND' });
    expect(byDoc.get('no-index')?.reason).toContain('no index named "nowhere"');
    expect(byDoc.get('other-subject')).toMatchObject({ state: 'failed', code: 'INVALID_INPUT' });
    expect(byDoc.get('no-pipeline')).toMatchObject({ state: 'failed', code: 'NOT_FOUND' });
    expect(byDoc.get('outside')).toMatchObject({ state: 'failed', code: 'READ_FAILED', document_id: null });
    expect(followed.end).toMatchObject({ state: 'partial', documents: { total: 5, ok: 1, failed: 4, unchanged: 0 } });

    // The two messages that are no jobs, in the dead-letter stream with their reason.
    await eventually(async () => {
      const info = await (await js.streams.get('SHOAL_DLQ')).info(false, { subjects_filter: 'shoal.dlq.documents.>' });
      expect(info.state.messages).toBe(2);
    }, 20_000);
    const dead = await (await js.streams.get('SHOAL_DLQ')).getMessage({ last_by_subj: 'shoal.dlq.documents.tiny' });
    expect(dead?.header.get('Shoal-Dead-Code')).toBe('INVALID_INPUT');
    expect(dead?.header.get('Shoal-Dead-Reason')).toContain('not a document job');
    expect(workers[1]?.state).toBe('running');
  }, 90_000);
});
