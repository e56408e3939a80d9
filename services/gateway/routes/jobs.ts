import { Readable } from 'node:stream';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { z } from 'zod';
import { ErrorCode, ShoalError } from '../../../adapters/protocol/errors.js';
import { JobId, JobSubmission, REQUEST_SCHEMAS, type JobPartResult, type JobsApi, type JobStatus } from '../../../adapters/protocol/jobs.js';
import type { NatsNames } from '../../../adapters/protocol/subjects.js';
import { parseWith } from '../../../adapters/protocol/validate.js';
import { checkJobIdFree } from '../job-ids.js';
import { publicIngestStatus, publicWireError } from '../redact.js';
import { MAX_RECENT_JOBS, RecentJobs } from '../recent-jobs.js';
import type { RouteContext } from '../context.js';
import { OTHER_MODEL } from '../request-metrics.js';

/**
 * Asynchronous jobs. POST /v1/jobs takes a JobSubmission (primitive, the primitive's request with
 * model and items, where results go, optional client job id for idempotent retries), checks the
 * inner request against the primitive's schema before anything is queued, and answers 202 with
 * the job id, its first status and a Location. GET /v1/jobs/:id answers the status from the
 * status bucket (state, part and item counts, first errors) plus where the results are;
 * GET /v1/jobs/:id/results streams a finished job's results as JSON Lines. Classification jobs
 * (POST /v1/classify, run inside this gateway or by the classify workers) and ingest runs answer
 * under the same paths.
 */

/** Where a job's results can be read, for clients that did not choose the target themselves. */
export type ResultLocation =
  /** `vectors`: float32-packed (`f32`, header `Shoal-Body: f32-v1`, docs/nats.md) or JSON numbers. */
  | { kind: 'stream'; stream: string; subject: string; vectors: 'f32' | 'json' }
  | { kind: 'store'; uri: string; files: string }
  /** Rows of the named index, written by the results sink (`shoal sink`, SHOAL_INDEXES). */
  | { kind: 'index'; index: string };

export function resultLocation(status: JobStatus, names: NatsNames): ResultLocation {
  if (status.result.kind === 'stream') {
    return { kind: 'stream', stream: names.resultsStream, subject: names.jobResults(status.job_id), vectors: status.result.vectors ?? 'f32' };
  }
  if (status.result.kind === 'index') return { kind: 'index', index: status.result.index };
  return { kind: 'store', uri: `${status.result.uri.replace(/\/+$/, '')}/${status.job_id}/`, files: 'part-<n>.jsonl' };
}

const JobParams = z.strictObject({ id: JobId });

/** The status as clients see it: the bookkeeping (counted-parts bitmap, content hash, submit marker) stays inside. */
export type PublicJobStatus = Omit<JobStatus, 'counted_parts' | 'content_hash' | 'submitted'>;

/**
 * The status without its bookkeeping, and its parts' errors redacted as error bodies are: a
 * worker's message may name its model folder or the file roots (redact.ts).
 */
export function publicStatus(status: JobStatus): PublicJobStatus {
  const { counted_parts: _counted, content_hash: _hash, submitted: _submitted, ...visible } = status;
  return { ...visible, errors: visible.errors.map(publicWireError) };
}

const FINISHED: ReadonlySet<JobStatus['state']> = new Set(['completed', 'failed', 'partial']);

/**
 * A job's results as JSON Lines, in item order: one line per item (encode, extract: the item as
 * the primitive returns it, `index` counting over the whole job; score: `{index, id?, score}`),
 * and `{"part", "error"}` in place of the items of a part that failed. Vectors packed on the
 * results stream arrive as JSON numbers.
 */
async function* resultLines(parts: AsyncIterable<JobPartResult>): AsyncGenerator<string> {
  for await (const part of parts) {
    if (part.status === 'error' || part.result === undefined) {
      yield `${JSON.stringify({ part: part.part, error: publicWireError(part.error ?? { code: ErrorCode.INTERNAL, message: 'the part has no result' }) })}\n`;
      continue;
    }
    const result = part.result;
    const rows: ReadonlyArray<{ index: number }> = 'scores' in result ? result.scores : result.items;
    let out = '';
    for (const row of [...rows].sort((a, b) => a.index - b.index)) out += `${JSON.stringify(row)}\n`;
    yield out;
  }
}

function jobsOrUnavailable(jobs: JobsApi | null): JobsApi {
  if (jobs === null) {
    throw new ShoalError(ErrorCode.UNAVAILABLE, 'asynchronous jobs need NATS JetStream, and this gateway runs without it; use the synchronous /v1/encode|score|extract');
  }
  return jobs;
}

/** GET /v1/jobs: `?limit=` jobs at most, the newest first. */
export const JobListQuery = z.strictObject({
  limit: z
    .string()
    .regex(/^\d{1,3}$/, 'limit: a number of jobs, 1 to ' + String(MAX_RECENT_JOBS))
    .transform(Number)
    .refine((n) => n >= 1 && n <= MAX_RECENT_JOBS, `limit: 1 to ${MAX_RECENT_JOBS}`)
    .default(50),
});

/** Status reads GET /v1/jobs makes side by side. */
const LOOKUPS_AT_ONCE = 6;

interface FoundJob {
  kind: 'classify' | 'ingest' | 'job';
  /** The job's model, for the metrics label; null when it has none (an ingest run). */
  model: string | null;
  /** Its status as GET /v1/jobs/:id answers it. */
  body: object;
}

/**
 * A job by id, wherever it lives: a classification job of this gateway, one of the classify
 * workers (its status in KV), a primitive job, or an ingest run; null when none has the id.
 */
async function findJob(context: RouteContext, reply: FastifyReply, id: string): Promise<FoundJob | null> {
  // A classification job (POST /v1/classify) lives in this gateway and needs no JetStream.
  const classifyRun = context.classifyRuns.status(id);
  if (classifyRun !== null) return { kind: 'classify', model: classifyRun.model, body: { ...classifyRun, links: { self: `/v1/jobs/${id}`, results: `/v1/jobs/${id}/results` } } };
  // A classification job of the classify workers: its status in KV, the same from every replica.
  const classifyJob = await context.call(reply)(async () => (await context.deps.classifyJobs?.status(id).catch(() => null)) ?? null);
  if (classifyJob !== null) return { kind: 'classify', model: classifyJob.model, body: { ...classifyJob, links: { self: `/v1/jobs/${id}`, results: `/v1/jobs/${id}/results` } } };
  const jobs = jobsOrUnavailable(context.deps.jobs);
  const status = await context.call(reply)(() => jobs.status(id));
  if (status !== null) return { kind: 'job', model: status.model, body: { ...publicStatus(status), results: resultLocation(status, context.names) } };
  // An ingest run (POST /v1/ingest) is a job too, its status kept by the ingest runs.
  const run = await context.call(reply)(async () => (await context.deps.ingest?.status(id)) ?? null);
  return run === null ? null : { kind: 'ingest', model: null, body: publicIngestStatus(run) };
}

export function registerJobRoutes(app: FastifyInstance, context: RouteContext): void {
  // Registered before the routes that accept jobs (this file's, then ingest's and classify's).
  const recent = new RecentJobs();
  recent.register(app);
  app.post('/v1/jobs', async (request, reply) => {
    context.metrics.track(request, { primitive: 'job', model: OTHER_MODEL, lane: 'bulk' });
    const submission = parseWith(JobSubmission, request.body, 'job submission');
    // The inner request is checked now so a bad job is refused here, not dead-lettered later.
    const inner = parseWith(REQUEST_SCHEMAS[submission.primitive], submission.request, `${submission.primitive} request of the job (field "request")`);
    context.metrics.track(request, { primitive: 'job', model: inner.model, lane: 'bulk' });
    const jobs = jobsOrUnavailable(context.deps.jobs);
    await context.call(reply)(() => checkJobIdFree(context, submission.job_id, 'job'));
    const submitted = await context.call(reply)(() => jobs.submit(submission));
    const location = `/v1/jobs/${submitted.job_id}`;
    return reply
      .code(202)
      .header('location', location)
      .send({ ...submitted, status: publicStatus(submitted.status), links: { self: location, results: `${location}/results` }, results: resultLocation(submitted.status, context.names) });
  });

  app.get('/v1/jobs/:id', async (request, reply) => {
    context.metrics.track(request, { primitive: 'job_read', model: OTHER_MODEL, lane: 'bulk' });
    const { id } = parseWith(JobParams, request.params, 'job path');
    const found = await findJob(context, reply, id);
    if (found === null) throw new ShoalError(ErrorCode.NOT_FOUND, `no job with id "${id}" (it never existed or its status has expired)`, { details: { job_id: id } });
    // A classification job's model was never checked at submit: a label only if it is one already.
    if (found.model !== null) context.metrics.track(request, { primitive: 'job_read', model: found.model, lane: 'bulk', admit: found.kind !== 'classify' });
    return found.body;
  });

  app.get('/v1/jobs', async (request, reply) => {
    context.metrics.track(request, { primitive: 'job_read', model: OTHER_MODEL, lane: 'bulk' });
    const { limit } = parseWith(JobListQuery, request.query ?? {}, 'job list query string');
    const ids = recent.newest(limit);
    const found: Array<FoundJob | null | undefined> = [];
    // A few at a time: each read watches the reply for a client that went away (a listener each).
    for (let start = 0; start < ids.length; start += LOOKUPS_AT_ONCE) {
      // A job that cannot be read now (its store down) is left out of this answer, not of the list.
      found.push(...(await Promise.all(ids.slice(start, start + LOOKUPS_AT_ONCE).map((id) => findJob(context, reply, id).catch(() => undefined)))));
    }
    ids.forEach((id, i) => {
      if (found[i] === null) recent.forget(id);
    });
    return { jobs: found.flatMap((job) => (job === null || job === undefined ? [] : [job.body])) };
  });

  app.get('/v1/jobs/:id/results', async (request, reply) => {
    context.metrics.track(request, { primitive: 'job_read', model: OTHER_MODEL, lane: 'bulk' });
    const { id } = parseWith(JobParams, request.params, 'job path');
    // A classification job's results: its file, one Classification line per product in input order.
    const classified = context.classifyRuns.results(id);
    if (classified !== null) {
      context.metrics.track(request, { primitive: 'job_read', model: classified.status.model, lane: 'bulk', admit: false });
      return reply.type('application/x-ndjson').header('shoal-job-state', classified.status.state).send(classified.stream);
    }
    // A classification job of the classify workers: streamed from its result target.
    const classifyJobs = context.deps.classifyJobs;
    const fromWorkers = classifyJobs === null || classifyJobs === undefined ? null : await context.call(reply)(() => classifyJobs.results(id));
    if (fromWorkers !== null) {
      context.metrics.track(request, { primitive: 'job_read', model: fromWorkers.status.model, lane: 'bulk', admit: false });
      return reply.type('application/x-ndjson').header('shoal-job-state', fromWorkers.status.state).send(fromWorkers.stream);
    }
    const jobs = jobsOrUnavailable(context.deps.jobs);
    const status = await context.call(reply)(() => jobs.status(id));
    if (status === null) {
      // An ingest run has no results stream: what it made is the rows of its index.
      // A gateway that cannot read ingest runs (no permission on their stream) has none to name.
      const run = await context.call(reply)(async () => (await context.deps.ingest?.status(id).catch(() => null)) ?? null);
      if (run !== null) {
        throw new ShoalError(ErrorCode.UNSUPPORTED_OPERATION, `job ${id} is an ingest run: it has no results to read here; its chunks are in index "${run.index}" (POST /v1/search), its counts in GET /v1/jobs/${id}`, {
          details: { job_id: id, kind: 'ingest', index: run.index },
        });
      }
      throw new ShoalError(ErrorCode.NOT_FOUND, `no job with id "${id}" (it never existed or its status has expired)`, { details: { job_id: id } });
    }
    context.metrics.track(request, { primitive: 'job_read', model: status.model, lane: 'bulk' });
    if (!FINISHED.has(status.state)) {
      throw new ShoalError(ErrorCode.UNAVAILABLE, `job ${id} is ${status.state} (${status.parts_done + status.parts_failed} of ${status.parts} parts finished): read its results once GET /v1/jobs/${id} says completed, partial or failed`, {
        details: { job_id: id, state: status.state },
      });
    }
    if (jobs.results === undefined) throw new ShoalError(ErrorCode.UNSUPPORTED_OPERATION, 'this gateway cannot read job results back');
    const parts = jobs.results(id);
    return reply.type('application/x-ndjson').header('shoal-job-state', status.state).send(Readable.from(resultLines(parts)));
  });
}
