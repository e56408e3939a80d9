import type { FastifyInstance } from 'fastify';
import { ClassifyHttpRequest, type ClassifyJobAccepted, type ParsedClassifyRequest } from '../../../adapters/protocol/classify.js';
import { ErrorCode, ShoalError } from '../../../adapters/protocol/errors.js';
import { parseWith } from '../../../adapters/protocol/validate.js';
import { RetryingEngine } from '../../../adapters/nats/retrying-engine.js';
import { abortable } from '../../../adapters/runtime/abortable.js';
import { matrixOptions, requestClassifierOptions, requestTaxonomy, resolveClassifierOptions, TaxonomyClassifier } from '../../../pipelines/classify/index.js';
import { checkJobIdFree } from '../job-ids.js';
import type { RouteContext } from '../context.js';
import { OTHER_MODEL } from '../request-metrics.js';

/**
 * POST /v1/classify: a few products into a taxonomy (inline taxonomy text or labels),
 * synchronously, through the gateway's engine (the workers embed; the gateway searches).
 * Category matrices stay in memory for the taxonomies used last, so a second request with the
 * same taxonomy and model embeds only its products. Above the sync limit (or with `mode: "job"`,
 * or a `job_id`) the request becomes a job: 202 with its id and `Location: /v1/jobs/<id>`,
 * classified in the background by ClassifyRuns (classify-runs.ts), its status and JSON Lines
 * results read under /v1/jobs/:id. `mode: "sync"` keeps the old contract: 413 above the limit.
 */

/** Products per synchronous request, unless the gateway's settings say otherwise (SHOAL_CLASSIFY_SYNC_ITEMS). */
export const MAX_SYNC_CLASSIFY_ITEMS = 256;
/** Category matrices kept in memory (each 10k categories × 384 dims is 16 MB). */
const KEPT_CLASSIFIERS = 4;
/** How long a matrix build waits out a worker busy with interactive calls (OVERLOADED) before it fails. */
const BUILD_RETRY_FOR_MS = 30_000;

export function registerClassifyRoutes(app: FastifyInstance, context: RouteContext): void {
  // Keyed by the taxonomy and what its matrices are built from (model, template…), not by top_k,
  // threshold or rerank, which each request applies to the kept matrices itself.
  const kept = new Map<string, Promise<TaxonomyClassifier>>();
  // Builds belong to the gateway, not to the request that started them: others may share them.
  const builds = new AbortController();
  const buildEngine = new RetryingEngine(context.deps.engine, BUILD_RETRY_FOR_MS);

  const classifierFor = (request: ParsedClassifyRequest): Promise<TaxonomyClassifier> => {
    const taxonomy = requestTaxonomy(request);
    const key = JSON.stringify([taxonomy.hash, matrixOptions(resolveClassifierOptions(requestClassifierOptions(request)))]);
    const existing = kept.get(key);
    if (existing !== undefined) {
      // Most recently used last.
      kept.delete(key);
      kept.set(key, existing);
      return existing;
    }
    // The gateway keeps its matrices in memory (the kept map), not in the disk cache.
    const opened = TaxonomyClassifier.open(buildEngine, taxonomy, requestClassifierOptions(request), { signal: builds.signal });
    // A failed build is forgotten, so the next request tries again.
    opened.catch(() => kept.delete(key));
    kept.set(key, opened);
    while (kept.size > KEPT_CLASSIFIERS) {
      const [oldest, evicted] = kept.entries().next().value ?? [];
      if (oldest === undefined || evicted === undefined) break;
      kept.delete(oldest);
      void evicted.then((classifier) => classifier.close()).catch(() => undefined);
    }
    return opened;
  };

  app.addHook('onClose', async () => {
    builds.abort();
    const all = [...kept.values()];
    kept.clear();
    await Promise.all(all.map((opened) => opened.then((classifier) => classifier.close()).catch(() => undefined)));
  });

  app.post('/v1/classify', async (request, reply) => {
    // The category and product embeddings run in the bulk lane (pipelines/classify), sync or job.
    context.metrics.track(request, { primitive: 'classify', model: OTHER_MODEL, lane: 'bulk' });
    const { mode = 'auto', job_id: jobId, ...parsed } = parseWith(ClassifyHttpRequest, request.body, 'classify request');
    const syncLimit = context.settings.classify?.syncItems ?? MAX_SYNC_CLASSIFY_ITEMS;
    if (mode === 'sync' && jobId !== undefined) throw new ShoalError(ErrorCode.INVALID_INPUT, 'job_id names a job: leave it out with mode "sync", or use mode "job"');
    const asJob = mode === 'job' || (mode === 'auto' && (jobId !== undefined || parsed.items.length > syncLimit));
    // A job is accepted before its model is loaded: its name becomes a label only once a sync request proved it.
    context.metrics.track(request, { primitive: 'classify', model: parsed.model, lane: 'bulk', admit: !asJob });
    if (asJob) {
      await context.call(reply)(() => checkJobIdFree(context, jobId, 'classify'));
      const status = context.classifyRuns.submit(parsed, jobId);
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
    return context.call(reply)(async (signal) => {
      // A client that leaves stops waiting for a shared build without cancelling it for the others.
      const classifier = await abortable(classifierFor(parsed), signal, 'the client went away');
      const options = resolveClassifierOptions(requestClassifierOptions(parsed));
      const items = await classifier.classify(parsed.items, { signal }, options);
      return { model: parsed.model, categories: classifier.taxonomy.categories.length, items };
    });
  });
}
