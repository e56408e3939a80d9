import { randomUUID } from 'node:crypto';
import { connectNats, redacted } from '../../../adapters/nats/connection/connection.js';
import { ErrorCode, ShoalError } from '../../../adapters/protocol/errors.js';
import { DocumentProducer, type FollowedRun } from '../../../pipelines/documents/document-producer.js';
import type { IngestProgress } from '../../../pipelines/documents/runner.js';
import type { PendingSource } from '../../../pipelines/documents/sources.js';
import { splitList} from '../../settings/environment.js';
import type { CliApp } from '../app.js';

/**
 * `shoal ingest --nats URL --index NAME` (NAME one of SHOAL_INDEXES) and `shoal runs watch RUN`:
 * this process is a producer, not a coordinator. It publishes one document job per source
 * (pipelines/documents/document-producer.ts) and, unless `--detach`, follows the run's events
 * until every document ended; `shoal worker --documents` processes do all the work. Stopping it
 * stops nothing but the watching: `shoal runs watch RUN` picks the run up again from anywhere.
 */

export interface ProduceCall {
  app: CliApp;
  nats: string;
  pipeline: string;
  index: string;
  sources: readonly PendingSource[];
  detach: boolean;
  quiet: boolean;
  onProgress: (progress: IngestProgress) => void;
}

async function withProducer<T>(app: CliApp, nats: string, use: (producer: DocumentProducer) => Promise<T>): Promise<T> {
  const servers = splitList(nats) ?? [nats];
  const nc = await connectNats({ ...app.settings.nats, servers, retryFirstConnect: false, name: 'shoal ingest' });
  try {
    const producer = await DocumentProducer.open(nc, app.settings.topology());
    try {
      return await use(producer);
    } finally {
      producer.close();
    }
  } finally {
    await nc.drain().catch(() => nc.close());
  }
}

/** Progress of a followed run, in the in-process bar's terms (read = ended: there is no intake here). */
function asProgress(total: number, ended: number, pages: number, ocrPages: number, chunks: number): IngestProgress {
  return { total, done: ended, read: ended, pages, ocrPages, chunks };
}

/** How long a run may see no event before the producer checks that a documents worker is there. */
const NO_WORKER_WARNING_MS = 5000;

async function follow(producer: DocumentProducer, app: CliApp, runId: string, pipeline: string, expected: number | undefined, onProgress: (progress: IngestProgress) => void): Promise<FollowedRun> {
  let lastEvent = Date.now();
  let warned = false;
  // Not silenced by --quiet: a run that waits for a worker that is not there must say why.
  const check = setInterval(() => {
    if (warned || Date.now() - lastEvent < NO_WORKER_WARNING_MS) return;
    void producer.hasWorker(pipeline).then((present) => {
      if (present || warned) return;
      warned = true;
      app.io.stderr.write(`warning: no documents worker serves pipeline ${pipeline}: the jobs wait in the queue (start \`shoal worker --documents --pipelines ${pipeline}\`); Ctrl-C stops the watching, not the run\n`);
    });
  }, 1000);
  try {
    return await producer.follow(runId, {
      signal: app.io.signal,
      ...(expected === undefined ? {} : { expected }),
      onEvent: (_event, progress) => {
        lastEvent = Date.now();
        onProgress(asProgress(progress.total, progress.ended, progress.pages, progress.ocrPages, progress.chunks));
      },
    });
  } finally {
    clearInterval(check);
  }
}

/** Publishes the run; null when detached (the run id was printed), else how it ended. */
export async function produceIngest(call: ProduceCall): Promise<{ runId: string; followed: FollowedRun | null }> {
  const { app } = call;
  return withProducer(app, call.nats, async (producer) => {
    const runId = randomUUID();
    if (!call.quiet || call.detach) app.io.stderr.write(`ingest run ${runId} over ${redacted(splitList(call.nats) ?? [call.nats])}: ${call.sources.length} document jobs on ${producer.names.subject(call.pipeline)} for \`shoal worker --documents\`\n`);
    const run = await producer.publish({ runId, pipeline: call.pipeline, index: call.index, sources: call.sources });
    if (call.detach) return { runId: run.runId, followed: null };
    return { runId: run.runId, followed: await follow(producer, app, run.runId, call.pipeline, run.documents, call.onProgress) };
  });
}

/** `shoal runs watch RUN`: follows a run published by anyone, from its first event. */
export async function watchRun(app: CliApp, nats: string, runId: string, onProgress: (progress: IngestProgress) => void): Promise<{ followed: FollowedRun; pipeline: string; index: string }> {
  return withProducer(app, nats, async (producer) => {
    const status = await producer.status(runId);
    if (status === null) throw new ShoalError(ErrorCode.NOT_FOUND, `no run ${runId} (never published, or its status expired after 7 days)`);
    const followed = await follow(producer, app, runId, status.pipeline, status.expected, onProgress);
    return { followed, pipeline: status.pipeline, index: status.index };
  });
}
