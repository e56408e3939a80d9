import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { ErrorCode, ShoalError } from '../../../adapters/protocol/errors.js';
import { JobId, JobSubmission, REQUEST_SCHEMAS, type JobsApi, type JobStatus } from '../../../adapters/protocol/jobs.js';
import type { NatsNames } from '../../../adapters/protocol/subjects.js';
import { parseWith } from '../../../adapters/protocol/validate.js';
import type { RouteContext } from '../context.js';
import { OTHER_MODEL } from '../request-metrics.js';

/**
 * Asynchronous jobs. POST /v1/jobs takes a JobSubmission (primitive, the primitive's request with
 * model and items, where results go, optional client job id for idempotent retries), checks the
 * inner request against the primitive's schema before anything is queued, and answers 202 with
 * the job id, its first status and a Location. GET /v1/jobs/:id answers the status from the
 * status bucket (state, part and item counts, first errors) plus where the results are.
 */

/** Where a job's results can be read, for clients that did not choose the target themselves. */
export type ResultLocation =
  /** `vectors`: float32-packed (`f32`, header `Shoal-Body: f32-v1`, docs/nats.md) or JSON numbers. */
  | { kind: 'stream'; stream: string; subject: string; vectors: 'f32' | 'json' }
  | { kind: 'store'; uri: string; files: string };

export function resultLocation(status: JobStatus, names: NatsNames): ResultLocation {
  if (status.result.kind === 'stream') {
    return { kind: 'stream', stream: names.resultsStream, subject: names.jobResults(status.job_id), vectors: status.result.vectors ?? 'f32' };
  }
  return { kind: 'store', uri: `${status.result.uri.replace(/\/+$/, '')}/${status.job_id}/`, files: 'part-<n>.jsonl' };
}

const JobParams = z.strictObject({ id: JobId });

function jobsOrUnavailable(jobs: JobsApi | null): JobsApi {
  if (jobs === null) {
    throw new ShoalError(ErrorCode.UNAVAILABLE, 'asynchronous jobs need NATS JetStream, and this gateway runs without it; use the synchronous /v1/encode|score|extract');
  }
  return jobs;
}

export function registerJobRoutes(app: FastifyInstance, context: RouteContext): void {
  app.post('/v1/jobs', async (request, reply) => {
    context.metrics.track(request, { primitive: 'job', model: OTHER_MODEL, lane: 'bulk' });
    const submission = parseWith(JobSubmission, request.body, 'job submission');
    // The inner request is checked now so a bad job is refused here, not dead-lettered later.
    const inner = parseWith(REQUEST_SCHEMAS[submission.primitive], submission.request, `${submission.primitive} request of the job (field "request")`);
    context.metrics.track(request, { primitive: 'job', model: inner.model, lane: 'bulk' });
    const jobs = jobsOrUnavailable(context.deps.jobs);
    const submitted = await context.call(reply)(() => jobs.submit(submission));
    const location = `/v1/jobs/${submitted.job_id}`;
    return reply
      .code(202)
      .header('location', location)
      .send({ ...submitted, links: { self: location }, results: resultLocation(submitted.status, context.names) });
  });

  app.get('/v1/jobs/:id', async (request, reply) => {
    const { id } = parseWith(JobParams, request.params, 'job path');
    const jobs = jobsOrUnavailable(context.deps.jobs);
    const status = await context.call(reply)(() => jobs.status(id));
    if (status === null) throw new ShoalError(ErrorCode.NOT_FOUND, `no job with id "${id}" (it never existed or its status has expired)`, { details: { job_id: id } });
    return { ...status, results: resultLocation(status, context.names) };
  });
}
