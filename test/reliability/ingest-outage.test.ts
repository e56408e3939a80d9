import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { NatsConnection } from '@nats-io/transport-node';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ensureIngestTopology, IngestStatusStore } from '../../adapters/nats/ingest/ingest-store.js';
import { ensureTopology, type Topology } from '../../adapters/nats/connection/topology.js';
import { S3Store } from '../../adapters/object-store/index.js';
import type { IngestRunStatus } from '../../adapters/protocol/ingest.js';
import { exited, expectSameRows, INGEST_ENV, Row, startWorkerProcess } from '../helpers/ingest-nats.js';
import { natsServerAvailable, NATS_SERVER_MISSING, startNatsServer, type NatsServerHandle } from '../helpers/nats-server.js';
import { TINY_MEAN, testConnection, uniquePrefix } from '../helpers/nats-worker.js';
import { startPgliteServer, type PgliteServerHandle } from '../helpers/pglite-server.js';
import { startS3Server, type S3ServerHandle } from '../helpers/s3-server.js';
import { DATA_DIR, missingReason, sharedAvailable } from '../helpers/shared.js';
import { SHOAL_BIN } from '../helpers/shoal-cli.js';
import { CLI_FROM_SOURCE } from '../helpers/cli-build.js';

/**
 * The outage test: an ingest THROUGH NATS (a private nats-server, a real `shoal worker
 * --parse` process serving the encode model, the CLI as coordinator) of documents read from
 * `s3://` on s3rver into a `postgres://` pgvector table on PGlite. Run A is undisturbed. During
 * run B, once its first documents are committed, s3rver is stopped for 30 s while documents are
 * still being read, then restarted on the same port and folder; once commits resume, PostgreSQL
 * is stopped for 30 s while commits are still pending, then restarted. B must exit 0 with every
 * document indexed and exactly A's rows (ids, texts, vectors, count, no duplicates), and its run
 * status (the ingest KV bucket, what GET /v1/jobs/:id answers) must have been seen `degraded`
 * naming each store while it was down, and clear once it was back. Every wait is on an
 * observable condition; the only fixed waits are the two 30-s outages themselves.
 */

const SCIFACT = join(DATA_DIR, 'scifact', 'corpus.jsonl');
const BUCKET = 'shoal-ingest-outage';
const OUTAGE_MS = 30_000;
/** Enough documents that a run outlasts the first commits by well over the time the test needs to react. */
const ABSTRACTS = 240;
const NOTES = 60;

const Summary = z.object({
  documents: z.object({ total: z.number(), ok: z.number(), failed: z.number(), unchanged: z.number() }),
  failed: z.array(z.object({ source: z.string(), code: z.string(), reason: z.string() })),
  chunks: z.number(),
  outages: z.array(z.object({ store: z.string(), reason: z.string(), since: z.string(), until: z.string().nullable() })),
});

const Abstract = z.object({ _id: z.string(), title: z.string(), text: z.string() });

interface CliRun {
  child: ChildProcess;
  /** Resolves with the run id printed on stderr. */
  runId: Promise<string>;
  done: Promise<{ code: number | null; stdout: string; stderr: string }>;
}

/** `shoal ingest --nats` as a child process whose stderr is read while it runs (the run id comes first). */
function startIngest(args: readonly string[], env: Record<string, string>): CliRun {
  const child = spawn(process.execPath, [SHOAL_BIN, ...args], {
    cwd: tmpdir(),
    env: { ...process.env, SHOAL_FROM_SOURCE: CLI_FROM_SOURCE, SHOAL_THREADS: '1', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  let foundId: (id: string) => void = () => undefined;
  const runId = new Promise<string>((resolve) => (foundId = resolve));
  child.stdout?.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr += chunk.toString('utf8');
    const id = /ingest run ([0-9a-f-]{36})/.exec(stderr)?.[1];
    if (id !== undefined) foundId(id);
  });
  const done = new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => child.on('close', (code) => resolve({ code, stdout, stderr })));
  return { child, runId, done };
}

/** Polls `check` every 200 ms until it returns a value (not undefined); fails with `what` after `timeoutMs`. */
async function until<T>(what: string, timeoutMs: number, check: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

const PgRow = z.object({ vector: z.string().transform((text) => z.array(z.number()).parse(JSON.parse(text))) }).passthrough();

async function readPgRows(url: string, table: string): Promise<{ rows: Row[]; count: number; distinct: number; states: number }> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const result = await client.query(`SELECT id, document_id, source, page, chunk, text, start, "end", heading, settings, vector::text AS vector FROM "${table}" ORDER BY id`);
    const rows = result.rows.map((row: unknown) => Row.parse(PgRow.parse(row)));
    const counts = await client.query<{ count: string; distinct: string }>(`SELECT count(*) AS count, count(DISTINCT id) AS distinct FROM "${table}"`);
    const states = await client.query<{ count: string }>(`SELECT count(*) AS count FROM "${table}__documents"`);
    return { rows, count: Number(counts.rows[0]?.count), distinct: Number(counts.rows[0]?.distinct), states: Number(states.rows[0]?.count) };
  } finally {
    await client.end();
  }
}

const ready = natsServerAvailable() && sharedAvailable(SCIFACT);

describe.skipIf(!ready)(`ingest over NATS through S3 and PostgreSQL outages ${natsServerAvailable() ? (sharedAvailable(SCIFACT) ? '' : missingReason(SCIFACT)) : NATS_SERVER_MISSING}`, () => {
  let nats: NatsServerHandle;
  let s3server: S3ServerHandle;
  let postgres: PgliteServerHandle;
  let worker: ChildProcess;
  let nc: NatsConnection;
  let statuses: IngestStatusStore;
  let topology: Topology;
  let root: string;
  let pipeline: string;
  const prefix = uniquePrefix('ingestoutage');
  const total = ABSTRACTS + NOTES;

  beforeAll(async () => {
    [nats, s3server, postgres] = await Promise.all([startNatsServer(), startS3Server([BUCKET]), startPgliteServer()]);
    // The worker loads while the documents are uploaded.
    worker = startWorkerProcess(nats.url, prefix);
    root = await mkdtemp(join(tmpdir(), 'shoal-ingest-outage-'));
    // Small chunks and small commits: many commits over the run, so an outage finds some pending.
    pipeline = join(root, 'outage.yaml');
    await writeFile(pipeline, 'name: outage\nstages:\n  chunk: {size: 64, overlap: 8}\n  write: {batchRows: 24}\n');
    const abstracts = readFileSync(SCIFACT, 'utf8').split('\n').slice(0, ABSTRACTS).map((line) => Abstract.parse(JSON.parse(line)));
    const store = new S3Store(s3server.settings());
    try {
      await Promise.all(abstracts.map((doc) => store.write({ bucket: BUCKET, key: `docs/scifact/${doc._id}.txt` }, Buffer.from(`${doc.title}\n\n${doc.text}\n`))));
      // Markdown notes built from the same abstracts (a heading and two sentences), parsed as Markdown.
      await Promise.all(
        abstracts.slice(0, NOTES).map((doc, i) => store.write({ bucket: BUCKET, key: `docs/notes/note-${String(i).padStart(3, '0')}.md` }, Buffer.from(`# ${doc.title}\n\n${doc.text.split('. ').slice(0, 2).join('. ')}.\n`))),
      );
    } finally {
      store.close();
    }
    nc = await testConnection(nats.url);
    topology = await ensureTopology(nc, { prefix });
    const names = await ensureIngestTopology(nc, topology);
    statuses = await IngestStatusStore.open(nc, names.bucket);
  }, 180_000);

  afterAll(async () => {
    worker?.kill('SIGTERM');
    if (worker !== undefined) await exited(worker);
    await nc?.close();
    await Promise.all([s3server?.stop(), postgres?.stop(), nats?.stop()]);
    if (root !== undefined) await rm(root, { recursive: true, force: true });
  }, 30_000);

  const args = (table: string): string[] => [
    'ingest', `s3://${BUCKET}/docs`, '--no-progress', '--json', '--model', TINY_MEAN, '--pipeline', pipeline, '--index', `${postgres.url}?table=${table}`, '--nats', nats.url,
  ];
  const env = (): Record<string, string> => ({ ...INGEST_ENV, ...s3server.env(), SHOAL_SUBJECT_PREFIX: prefix });

  it('S3 and PostgreSQL each down 30 s mid-run: the run completes with exactly the undisturbed rows, and its status showed degraded', async () => {
    const undisturbed = await startIngest(args('run_a'), env()).done;
    expect(undisturbed.code, undisturbed.stderr).toBe(0);
    const a = Summary.parse(JSON.parse(undisturbed.stdout));
    expect(a.documents).toEqual({ total, ok: total, failed: 0, unchanged: 0 });
    expect(a.outages).toEqual([]);

    const run = startIngest(args('run_b'), env());
    const runId = await run.runId;
    const status = async (): Promise<IngestRunStatus | null> => statuses.run(runId);
    // The run status as a gateway's GET /v1/jobs/:id reads it, polled until it shows what is awaited.
    const watch = async (predicate: (s: IngestRunStatus) => boolean): Promise<IngestRunStatus | undefined> => {
      const current = await status();
      return current !== null && predicate(current) ? current : undefined;
    };

    // S3: stopped once the first documents are committed, while later ones are still to be read.
    const first = await until('the first committed documents', 60_000, () => watch((s) => s.documents.ok > 0));
    expect(first.documents.ok).toBeLessThan(total / 2);
    await s3server.halt();
    const s3Down = Date.now();
    const s3Mark = await until('degraded naming S3', OUTAGE_MS, () => watch((s) => s.degraded?.reason.startsWith('s3 unavailable') === true));
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, OUTAGE_MS - (Date.now() - s3Down))));
    const okBeforeS3 = (await status())?.documents.ok ?? 0;
    await s3server.start();
    const afterS3 = await until('commits resuming after S3 is back', 60_000, () => watch((s) => s.degraded === undefined && s.documents.ok > okBeforeS3));

    // PostgreSQL: stopped while commits are still pending.
    expect(afterS3.documents.ok).toBeLessThan(total);
    await postgres.halt();
    const pgDown = Date.now();
    const pgMark = await until('degraded naming pgvector', OUTAGE_MS, () => watch((s) => s.degraded?.reason.startsWith('pgvector unavailable') === true));
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, OUTAGE_MS - (Date.now() - pgDown))));
    const stalled = await status();
    expect(stalled?.state).toBe('running');
    expect(stalled?.degraded?.reason).toMatch(/^pgvector unavailable/);
    const okBeforePg = stalled?.documents.ok ?? 0;
    await postgres.start();
    await until('commits resuming after PostgreSQL is back', 60_000, () => watch((s) => s.degraded === undefined && s.documents.ok > okBeforePg));

    const finished = await run.done;
    expect(finished.code, finished.stderr).toBe(0);
    const b = Summary.parse(JSON.parse(finished.stdout));
    expect(b.documents).toEqual({ total, ok: total, failed: 0, unchanged: 0 });
    expect(b.chunks).toBe(a.chunks);
    // The summary lists both outages, closed, each about as long as its store was down (a read
    // that was already answered when s3rver stopped may split a period: any one long period counts).
    expect([...new Set(b.outages.map((outage) => outage.store))].sort()).toEqual(['pgvector', 's3']);
    for (const store of ['s3', 'pgvector']) {
      const longest = Math.max(...b.outages.filter((outage) => outage.store === store).map((outage) => Date.parse(outage.until ?? '') - Date.parse(outage.since)));
      expect(longest, store).toBeGreaterThan(OUTAGE_MS - 5_000);
    }
    expect(b.outages.every((outage) => outage.until !== null)).toBe(true);
    // The marks were seen in the run status, dated after each store stopped; stderr said so too.
    expect(Date.parse(s3Mark.degraded?.since ?? '')).toBeGreaterThanOrEqual(s3Down - 1_000);
    expect(Date.parse(pgMark.degraded?.since ?? '')).toBeGreaterThanOrEqual(pgDown - 1_000);
    expect(finished.stderr).toMatch(/warning: degraded since \S+: s3 unavailable, retrying/);
    expect(finished.stderr).toMatch(/warning: degraded since \S+: pgvector unavailable, retrying/);
    expect(finished.stderr).toContain('pgvector answers again');
    // No parse task nor encode part was dead-lettered because a store was down.
    expect((await topology.jsm.streams.info(topology.names.deadLetterStream)).state.messages).toBe(0);
    const final = await status();
    expect(final).toMatchObject({ state: 'completed', documents: { total, ok: total, failed: 0, unchanged: 0 } });
    expect(final?.degraded).toBeUndefined();

    // Exactly A's rows: same ids and texts, vectors equal (within float32 batch noise), same count, no duplicates.
    const [rowsA, rowsB] = await Promise.all([readPgRows(postgres.url, 'run_a'), readPgRows(postgres.url, 'run_b')]);
    expect(rowsA.count).toBe(a.chunks);
    expect(rowsB.count).toBe(rowsA.count);
    expect(rowsB.distinct).toBe(rowsB.count);
    expect(rowsB.states).toBe(total);
    expectSameRows(rowsA.rows, rowsB.rows);
  }, 240_000);
});
