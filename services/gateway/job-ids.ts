import { ErrorCode, ShoalError } from '../../adapters/protocol/errors.js';
import type { RouteContext } from './context.js';

/**
 * One namespace of job ids for the three kinds of job the gateway answers under /v1/jobs/:id:
 * primitive jobs (JetStream KV), ingest runs (their own KV) and classification jobs (in this
 * gateway, or the classify workers' in KV). Each store checks only its own ids, so without this an ingest run could take an encode
 * job's id and hide it from GET /v1/jobs/:id, whose lookup tries classify, then jobs, then ingest.
 * Two submissions of different kinds racing with one new id can still both pass; the ids a caller
 * chooses are meant to be unique, and this check is for the mistake, not the race.
 */

export type JobKind = 'job' | 'ingest' | 'classify';

const NAMES: Readonly<Record<JobKind, string>> = { job: 'an encode/score/extract job', ingest: 'an ingest run', classify: 'a classification job' };

/**
 * Whether a store holds `id`; a store this gateway cannot read (a NATS user without the ingest
 * stream's permissions, a deployment that does no ingest) holds nothing it could hide.
 */
async function holds(lookup: () => Promise<unknown>): Promise<boolean> {
  try {
    return (await lookup()) !== null;
  } catch {
    return false;
  }
}

/** The kind of job (other than `kind`) that already holds `id`, or null. */
async function heldByOtherKind(context: RouteContext, id: string, kind: JobKind): Promise<JobKind | null> {
  const { jobs, ingest, classifyJobs } = context.deps;
  if (kind !== 'classify' && context.classifyRuns.status(id) !== null) return 'classify';
  if (kind !== 'classify' && classifyJobs !== null && classifyJobs !== undefined && (await holds(() => classifyJobs.status(id)))) return 'classify';
  if (kind !== 'job' && jobs !== null && (await holds(() => jobs.status(id)))) return 'job';
  if (kind !== 'ingest' && ingest !== null && ingest !== undefined && (await holds(() => ingest.status(id)))) return 'ingest';
  return null;
}

/** Refuses a caller-chosen `id` that a job of another kind already holds: 409 JOB_CONFLICT. */
export async function checkJobIdFree(context: RouteContext, id: string | undefined, kind: JobKind): Promise<void> {
  if (id === undefined) return;
  const other = await heldByOtherKind(context, id, kind);
  if (other === null) return;
  throw new ShoalError(ErrorCode.JOB_CONFLICT, `job id "${id}" already names ${NAMES[other]}; choose another job_id`, { details: { job_id: id, kind: other } });
}
