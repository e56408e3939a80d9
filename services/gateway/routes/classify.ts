import type { FastifyInstance } from 'fastify';
import { ClassifyHttpRequest, type ClassifyJobAccepted, type ClassifyRunStatus, type ParsedClassifyRequest } from '../../../adapters/protocol/classify.js';
import { ErrorCode, ShoalError } from '../../../adapters/protocol/errors.js';
import { parseWith } from '../../../adapters/protocol/validate.js';
import { RetryingEngine } from '../../../adapters/nats/rpc/retrying-engine.js';
import { requestClassifierOptions, requestTaxonomy, resolveClassifierOptions } from '../../../pipelines/classify/index.js';
import { KeptClassifiers } from '../kept-classifiers.js';
import { checkJobIdFree } from '../job-ids.js';
import type { RouteContext } from '../context.js';
import { OTHER_MODEL } from '../request-metrics.js';

/**
 * POST /v1/classify: a few products into a taxonomy (inline taxonomy text or labels),
 * synchronously, through the gateway's engine (the workers embed; the gateway searches).
 * Category matrices stay in memory for the taxonomies used last, so a second request with the
 * same taxonomy and model embeds only its products; a build no request waits for any more is
 * aborted (kept-classifiers.ts). Above the sync limits (items, or taxonomy categories), or with
 * `mode: "job"`, or a `job_id`, the request becomes a job: 202 with its id and `Location: /v1/jobs/<id>`,
 * classified in the background by ClassifyRuns (classify-runs.ts), or, with SHOAL_CLASSIFY_JOBS,
 * published as classification jobs for the classify workers (classify-jobs.ts, optionally to a
 * `result` target), its status and JSON Lines results read under /v1/jobs/:id. `mode: "sync"` keeps the old contract: 413 above the limit.
 */

/** Products per synchronous request, unless the gateway's settings say otherwise (SHOAL_CLASSIFY_SYNC_ITEMS). */
export const MAX_SYNC_CLASSIFY_ITEMS = 256;
/** Category matrices kept in memory (each 10k categories × 384 dims is 16 MB). */
const KEPT_CLASSIFIERS = 4;
/** How long a matrix build waits out a worker busy with interactive calls (OVERLOADED) before it fails. */
const BUILD_RETRY_FOR_MS = 30_000;
/**
 * Categories of a synchronous request's taxonomy (or labels): building its matrix has to finish
 * within the request timeout (60 s by default), which a taxonomy of ten thousand
 * categories does not on a CPU worker. Larger taxonomies run as a job (mode "auto"), or are
 * refused with 413 under mode "sync".
 */
export const MAX_SYNC_TAXONOMY_CATEGORIES = 2_048;

/** The models a run names must be served by some worker (as a job's are checked): refused now, not after the 202. */
async function checkServedModels(context: RouteContext, request: ParsedClassifyRequest): Promise<void> {
  const jobs = context.deps.jobs;
  if (jobs === null) throw new ShoalError(ErrorCode.UNAVAILABLE, 'classification jobs need NATS JetStream, and this gateway runs without it');
  await jobs.checkModel('encode', request.model);
  if (request.image_model !== undefined) await jobs.checkModel('encode', request.image_model);
  const rerank = typeof request.rerank === 'string' ? request.rerank : request.rerank?.model;
  if (rerank !== undefined) await jobs.checkModel('score', rerank);
}

/** SHOAL_CLASSIFY_JOBS: published for the classify workers (classify-jobs.ts); any replica answers it from here on. */
async function submitAsJobs(context: RouteContext, request: ParsedClassifyRequest, jobId: string | undefined, result: string | undefined): Promise<ClassifyRunStatus> {
  const classifyJobs = context.deps.classifyJobs;
  if (classifyJobs === null || classifyJobs === undefined) throw new ShoalError(ErrorCode.UNAVAILABLE, 'this gateway cannot publish classification jobs (it runs without NATS JetStream)');
  await checkServedModels(context, request);
  return classifyJobs.submit(request, jobId, result);
}

/** Without SHOAL_CLASSIFY_JOBS: run in this gateway's process (classify-runs.ts), results read back from it only. */
function inGateway(context: RouteContext, request: ParsedClassifyRequest, jobId: string | undefined, result: string | undefined): ClassifyRunStatus {
  if (result !== undefined) {
    throw new ShoalError(ErrorCode.INVALID_INPUT, '"result" targets are written by the classify workers: this gateway runs classification jobs itself (SHOAL_CLASSIFY_JOBS is off); leave "result" out and read GET /v1/jobs/<id>/results', { details: { field: 'result' } });
  }
  return context.classifyRuns.submit(request, jobId);
}

export function registerClassifyRoutes(app: FastifyInstance, context: RouteContext): void {
  const kept = new KeptClassifiers({ engine: new RetryingEngine(context.deps.engine, BUILD_RETRY_FOR_MS), keep: KEPT_CLASSIFIERS });
  app.addHook('onClose', async () => kept.close());

  app.post('/v1/classify', async (request, reply) => {
    // The category and product embeddings run in the bulk lane (pipelines/classify), sync or job.
    context.metrics.track(request, { primitive: 'classify', model: OTHER_MODEL, lane: 'bulk' });
    const { mode = 'auto', job_id: jobId, result, ...parsed } = parseWith(ClassifyHttpRequest, request.body, 'classify request');
    const syncLimit = context.settings.classify?.syncItems ?? MAX_SYNC_CLASSIFY_ITEMS;
    if (mode === 'sync' && jobId !== undefined) throw new ShoalError(ErrorCode.INVALID_INPUT, 'job_id names a job: leave it out with mode "sync", or use mode "job"');
    // Parsed here (not in the job, which parses its own) to know its size before choosing sync.
    const taxonomy = mode === 'job' || jobId !== undefined || parsed.items.length > syncLimit ? null : requestTaxonomy(parsed);
    const taxonomyTooLarge = taxonomy !== null && taxonomy.categories.length > MAX_SYNC_TAXONOMY_CATEGORIES;
    const asJob = mode === 'job' || (mode === 'auto' && (jobId !== undefined || parsed.items.length > syncLimit || taxonomyTooLarge));
    // A job is accepted before its model is loaded: its name becomes a label only once a sync request proved it.
    context.metrics.track(request, { primitive: 'classify', model: parsed.model, lane: 'bulk', admit: !asJob });
    if (result !== undefined && !asJob) throw new ShoalError(ErrorCode.INVALID_INPUT, '"result" names where a job\'s results go: give mode "job" (or leave mode out above the sync limit)', { details: { field: 'result' } });
    if (asJob) {
      await context.call(reply)(() => checkJobIdFree(context, jobId, 'classify'));
      const status = context.settings.classifyJobs === true ? await context.call(reply)(() => submitAsJobs(context, parsed, jobId, result)) : inGateway(context, parsed, jobId, result);
      const location = `/v1/jobs/${status.job_id}`;
      const accepted: ClassifyJobAccepted = { job_id: status.job_id, status_url: location, results_url: `${location}/results`, status };
      return reply.code(202).header('location', location).send(accepted);
    }
    if (parsed.items.length > syncLimit) {
      throw new ShoalError(
        ErrorCode.INPUT_TOO_LARGE,
        `POST /v1/classify with mode "sync" takes at most ${syncLimit} items (got ${parsed.items.length}); leave mode out (or send mode "job") to run it as a job, or classify a catalog with \`shoal classify CATALOG --taxonomy FILE --nats URL\``,
        { details: { limit: syncLimit } },
      );
    }
    if (taxonomy === null || taxonomyTooLarge) {
      const categories = taxonomy?.categories.length ?? 0;
      throw new ShoalError(
        ErrorCode.INPUT_TOO_LARGE,
        `taxonomy: POST /v1/classify with mode "sync" takes taxonomies of at most ${MAX_SYNC_TAXONOMY_CATEGORIES} categories (got ${categories}); leave mode out (or send mode "job") to run it as a job`,
        { details: { field: 'taxonomy', limit: MAX_SYNC_TAXONOMY_CATEGORIES, categories } },
      );
    }
    return context.call(reply)(async (signal) => {
      // Aborted at the deadline or when the client leaves: a build no other request waits for stops then.
      const classifier = await kept.use(parsed, taxonomy, signal);
      const options = resolveClassifierOptions(requestClassifierOptions(parsed));
      const items = await classifier.classify(parsed.items, { signal }, options);
      return { model: parsed.model, categories: classifier.taxonomy.categories.length, items };
    });
  });
}
