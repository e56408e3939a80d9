import { setTimeout as sleep } from 'node:timers/promises';
import type { FastifyReply } from 'fastify';
import type { IngestRunStatus } from '../../adapters/protocol/ingest.js';
import type { IngestApi } from './context.js';

/**
 * `POST /v1/ingest?wait=true`: the request stays open until its run is over, so a script can
 * search right after it (the README's quick start did, and raced the asynchronous run). Bounded
 * by the gateway's request timeout: a run still going then is answered 202 as without `wait`, and
 * the caller polls `GET /v1/jobs/<id>`. The status is read every 50 ms at first, then less often
 * (up to once a second), and not at all once the client has gone.
 */

const FIRST_POLL_MS = 50;
const MAX_POLL_MS = 1_000;
const FINISHED: ReadonlySet<IngestRunStatus['state']> = new Set(['completed', 'partial', 'failed']);

export function isFinishedRun(status: IngestRunStatus): boolean {
  return FINISHED.has(status.state);
}

/** The run's status once finished, or its latest status when `timeoutMs` passed or the client left. */
export async function waitForRun(ingest: IngestApi, started: IngestRunStatus, reply: FastifyReply, timeoutMs: number): Promise<IngestRunStatus> {
  const controller = new AbortController();
  const onClose = (): void => {
    if (!reply.raw.writableFinished) controller.abort();
  };
  reply.raw.once('close', onClose);
  const deadline = Date.now() + timeoutMs;
  let latest = started;
  let pause = FIRST_POLL_MS;
  try {
    while (!isFinishedRun(latest) && !controller.signal.aborted) {
      const left = deadline - Date.now();
      if (left <= 0) break;
      const aborted = await sleep(Math.min(pause, left), true, { signal: controller.signal }).then(
        () => false,
        () => true,
      );
      if (aborted) break;
      latest = (await ingest.status(started.job_id)) ?? latest;
      pause = Math.min(pause * 2, MAX_POLL_MS);
    }
    return latest;
  } finally {
    reply.raw.off('close', onClose);
  }
}
