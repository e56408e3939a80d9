import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectNats } from '../../adapters/nats/connection/connection.js';
import { checkReplicatedServer } from '../../adapters/nats/connection/topology.js';
import { DocumentEvent } from '../../adapters/protocol/documents.js';
import { CLI_FROM_SOURCE } from '../helpers/cli-build.js';
import { NATS_CLUSTER_SERVER_BIN, natsServerVersion, startNatsCluster, type NatsClusterHandle } from '../helpers/nats-cluster.js';
import { FIXTURE_MODELS_DIR, TINY_MEAN } from '../helpers/nats-worker.js';
import { startPgliteServer, type PgliteServerHandle } from '../helpers/pglite-server.js';
import { S3RVER_CREDENTIALS, startS3Server, type S3ServerHandle } from '../helpers/s3-server.js';
import { runShoal, SHOAL_BIN } from '../helpers/shoal-cli.js';

/**
 * Issue 35, item 7: document jobs beyond one machine. A 3-server JetStream cluster on loopback
 * (streams, KV and object store at 3 replicas: SHOAL_STREAM_REPLICAS=3), 320 documents in s3rver
 * ingested into pgvector (PGlite over pglite-socket) by two `shoal worker --documents` processes
 * and one model worker. Mid-run the server leading the document stream and one documents worker
 * are SIGKILLed, then both restarted. Afterwards: the index holds exactly the rows of an
 * undisturbed in-process run of the same objects (0 lost, 0 duplicated), the events stream holds
 * exactly one terminal event per document, and the run's end says 320 committed.
 *
 * Replicated streams need nats-server 2.9.21+; CI fetches Debian trixie's 2.10 for this lane
 * (SHOAL_NATS_CLUSTER_SERVER, .ci/run). With an older server the file is skipped.
 */

const VERSION = existsSync(NATS_CLUSTER_SERVER_BIN) ? natsServerVersion() : null;
const REPLICATES = VERSION !== null && (() => {
  try {
    checkReplicatedServer(VERSION, 3);
    return true;
  } catch {
    return false;
  }
})();
const SKIPPED = `skipped: ${NATS_CLUSTER_SERVER_BIN} ${VERSION ?? '(missing)'} cannot replicate streams (set SHOAL_NATS_CLUSTER_SERVER to nats-server 2.9.21+)`;
const COUNT = 320;
const BUCKET = 'corpus';

describe.skipIf(!REPLICATES)('document jobs on a 3-server JetStream cluster', () => {
  let cluster: NatsClusterHandle;
  let s3: S3ServerHandle;
  let db: PgliteServerHandle;
  let root: string;
  const children: ChildProcess[] = [];

  const env = (): Record<string, string> => ({
    ...s3.env(),
    SHOAL_MODEL_DIR: FIXTURE_MODELS_DIR,
    SHOAL_PIPELINES: join(root, 'pipelines'),
    // PGlite's socket server, shared by every worker's connections, interleaves the extended-protocol
    // messages of concurrent connections (electric-sql/pglite#1046: "unnamed prepared statement does
    // not exist", and now and then an answer never sent: a BEGIN, seen under load): the worker's
    // query fails after this long and its batch is retried, instead of waiting out pgvector's
    // default read timeout (60 s). A real PostgreSQL has one backend per connection.
    SHOAL_INDEXES: `pg=${db.url}?table=cluster_docs&query_timeout=15000`,
    SHOAL_STREAM_REPLICAS: '3',
    NATS_URL: cluster.urls.join(','),
    SHOAL_FROM_SOURCE: CLI_FROM_SOURCE,
    SHOAL_THREADS: '1',
    // Warnings of the failover (pulls retried, heartbeats missed) are expected here; errors still
    // show. SHOAL_TEST_CLUSTER_LOG_LEVEL=warn (or info) shows the workers' failover while debugging.
    SHOAL_LOG_LEVEL: process.env.SHOAL_TEST_CLUSTER_LOG_LEVEL ?? 'error',
  });

  /** Workers that exited without the test killing them, and the signal that stops what waits for them. */
  const gone: string[] = [];
  const workerGone = new AbortController();
  const killedOnPurpose = new Set<ChildProcess>();

  function worker(args: readonly string[]): ChildProcess {
    const child = spawn(process.execPath, [SHOAL_BIN, 'worker', ...args, '--ack-wait', '4000'], { cwd: tmpdir(), env: { ...process.env, ...env() }, stdio: ['ignore', 'ignore', 'inherit'] });
    children.push(child);
    child.once('exit', (code, signal) => {
      if (killedOnPurpose.has(child)) return;
      gone.push(`shoal worker ${args.join(' ')} exited (${signal ?? code})`);
      workerGone.abort();
    });
    return child;
  }

  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), 'shoal-cluster-docs-'));
    await mkdir(join(root, 'pipelines'));
    await writeFile(join(root, 'pipelines', 'tiny.yaml'), `name: tiny\nstages:\n  encode:\n    model: ${TINY_MEAN}\n`);
    [cluster, s3, db] = await Promise.all([startNatsCluster({ size: 3 }), startS3Server([BUCKET]), startPgliteServer()]);
    const client = new S3Client({ endpoint: s3.endpoint, region: 'us-east-1', forcePathStyle: true, credentials: { ...S3RVER_CREDENTIALS } });
    const topics = ['harbour pilots board ships at the outer buoy', 'tides follow the moon twice a day', 'dredgers keep the channel deep', 'fish markets open before dawn'];
    for (let start = 0; start < COUNT; start += 32) {
      await Promise.all(
        Array.from({ length: Math.min(32, COUNT - start) }, (_, k) => {
          const n = start + k;
          const body = `Notice ${n}. ${topics[n % topics.length]}. `.repeat(1 + (n % 4));
          return client.send(new PutObjectCommand({ Bucket: BUCKET, Key: `notices/${String(n).padStart(4, '0')}.txt`, Body: body }));
        }),
      );
    }
    client.destroy();
  }, 180_000);

  afterAll(async () => {
    for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await Promise.all(children.map((child) => (child.exitCode === null && child.signalCode === null ? new Promise((resolve) => child.once('exit', resolve)) : undefined)));
    await Promise.all([cluster?.stop(), s3?.stop(), db?.stop()]);
    await rm(root, { recursive: true, force: true });
  }, 60_000);

  it(REPLICATES ? 'loses and duplicates nothing when the stream leader and a documents worker are SIGKILLed mid-run' : SKIPPED, async () => {
    worker(['--models', TINY_MEAN, '--concurrency', '8']);
    const documentsA = worker(['--documents', '--pipelines', 'tiny']);
    worker(['--documents', '--pipelines', 'tiny']);
    const published = await runShoal(['ingest', `s3://${BUCKET}/notices/`, '--pipeline', 'tiny', '--nats', cluster.urls.join(','), '--index', 'pg', '--detach', '--json'], { env: env() });
    expect(published.code, published.stderr).toBe(0);
    const { run_id: runId, documents } = JSON.parse(published.stdout.trim()) as { run_id: string; documents: number };
    expect(documents).toBe(COUNT);

    const nc = await connectNats({ servers: [...cluster.urls], retryFirstConnect: false, reconnectWaitMs: 100, reconnectMaxWaitMs: 500 });
    const jsm = await jetstreamManager(nc);
    const stream = await jsm.streams.info('SHOAL_DOCUMENTS');
    expect(stream.config.num_replicas).toBe(3);
    expect((await jsm.streams.info('SHOAL_EVENTS')).config.num_replicas).toBe(3);
    // Mid-run: some documents ended, most not.
    const deadline = Date.now() + 120_000;
    for (;;) {
      const info = await jsm.streams.info('SHOAL_EVENTS', { subjects_filter: `shoal.events.documents.${runId}` }).catch(() => null);
      const ended = info?.state.messages ?? 0;
      if (ended >= 40 || Date.now() > deadline) break;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const leader = (await jsm.streams.info('SHOAL_DOCUMENTS')).cluster?.leader;
    expect(leader).toBeDefined();
    const leaderServer = cluster.server(leader ?? '');
    killedOnPurpose.add(documentsA);
    await Promise.all([leaderServer.kill('SIGKILL'), new Promise<void>((resolve) => {
      documentsA.once('exit', () => resolve());
      documentsA.kill('SIGKILL');
    })]);
    await new Promise((resolve) => setTimeout(resolve, 1500));
    await leaderServer.start();
    worker(['--documents', '--pipelines', 'tiny']);

    // A worker that exits on its own (it could not start, it crashed) ends the wait at once, saying which.
    const watched = await runShoal(['runs', 'watch', runId, '--json', '--nats', cluster.urls.join(',')], { env: env(), signal: workerGone.signal });
    expect(gone).toEqual([]);
    expect(watched.code, watched.stderr).toBe(0);
    expect(JSON.parse(watched.stdout.trim())).toMatchObject({ state: 'completed', documents: { total: COUNT, ok: COUNT, failed: 0, unchanged: 0 } });

    // Exactly one stored terminal event per document.
    const consumer = await jetstream(nc).consumers.get('SHOAL_EVENTS', { filter_subjects: `shoal.events.documents.${runId}` });
    const events: DocumentEvent[] = [];
    for await (const msg of await consumer.fetch({ max_messages: 2 * COUNT, expires: 3000 })) events.push(DocumentEvent.parse(msg.json()));
    await nc.close();
    expect(events).toHaveLength(COUNT);
    expect(new Set(events.map((event) => event.doc)).size).toBe(COUNT);

    // The rows of an undisturbed in-process run of the same objects, into another table.
    const reference = await runShoal(['ingest', `s3://${BUCKET}/notices/`, '--pipeline', join(root, 'pipelines', 'tiny.yaml'), '--index', `${db.url}?table=reference_docs`, '--no-progress'], { env: env() });
    expect(reference.code, reference.stderr).toBe(0);
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    const rows = async (table: string): Promise<{ id: string; source: string; text: string }[]> => (await client.query<{ id: string; source: string; text: string }>(`SELECT id, source, text FROM ${table} ORDER BY id`)).rows;
    const [clustered, undisturbed] = [await rows('cluster_docs'), await rows('reference_docs')];
    await client.end();
    expect(undisturbed.length).toBeGreaterThanOrEqual(COUNT);
    expect(new Set(clustered.map((row) => row.id)).size).toBe(clustered.length);
    expect(clustered).toEqual(undisturbed);
  }, 300_000);
});
