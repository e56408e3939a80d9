import multipart from '@fastify/multipart';
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { ErrorCode, isShoalError, ShoalError } from '../../../adapters/protocol/errors.js';
import { DataRef, JobId } from '../../../adapters/protocol/jobs.js';
import { checkRemoteModelName } from '../../../adapters/protocol/model-names.js';
import { parseWith } from '../../../adapters/protocol/validate.js';
import { builtinModelIds } from '../../../adapters/sources/builtin-models.js';
import { builtinPipelineNames, pipelineByName, resolvePipeline } from '../../../pipelines/documents/builtin.js';
import { RESOURCE_NAME } from '../../../adapters/protocol/documents.js';
import { DocumentMetadataSchema } from '../../../adapters/protocol/metadata.js';
import type { IngestRunStatus } from '../../../adapters/protocol/ingest.js';
import { applyOverrides, parseDefinition, type PipelineDefinition } from '../../../pipelines/documents/definition.js';
import { checkJobIdFree } from '../job-ids.js';
import type { IngestApi, RouteContext } from '../context.js';
import { INDEX_NAME, indexTarget } from '../index-stores.js';
import { isFinishedRun, waitForRun } from '../ingest-wait.js';
import { OTHER_MODEL } from '../request-metrics.js';
import { publicIngestStatus } from '../redact.js';
import { isUpload, uploadedBody } from './ingest-form.js';

/**
 * POST /v1/ingest: documents into a configured index, as a job. The body names the sources
 * (inline `{id, text}` records, or `{id?, ref}` references: `obj://` in the NATS object store,
 * `file://` inside the gateway's file roots, `s3://` where supported), a built-in pipeline name or
 * a whole definition (its write target is ignored: the index is `index`, a name the operator
 * configured, never a path), optionally `model`, `force` and `prune` (a `file://` folder stands
 * for its files and is a prune root, services/gateway/ingest-folders.ts). The run is asynchronous:
 * 202 with the job id and `Location: /v1/jobs/<id>`, where its status (documents ok / failed /
 * unchanged, pages, chunks, first failures) is read; with `?wait=true` the answer waits for the
 * run to finish (200), within the request timeout. Parsing and encoding run on the workers.
 */

const MAX_SOURCES = 10_000;
const RecordId = z.union([z.string().min(1).max(512), z.number().finite()]).transform(String);

export const IngestBody = z.strictObject({
  index: z.string().regex(INDEX_NAME, 'an index name: letters, digits, _ or -, up to 64'),
  sources: z
    // `metadata`: stored with the document's chunks, filterable as metadata.<field> (adapters/protocol/metadata.ts).
    .array(z.union([z.strictObject({ id: RecordId, text: z.string().max(16 * 1024 * 1024), metadata: DocumentMetadataSchema.optional() }), z.strictObject({ id: RecordId.optional(), ref: DataRef, metadata: DocumentMetadataSchema.optional() })]))
    .min(1)
    .max(MAX_SOURCES),
  /** A built-in pipeline name, or a definition object (never a file path). */
  pipeline: z.union([z.string().min(1).max(128), z.record(z.string(), z.unknown())]).optional(),
  /** The encode stage's model. */
  model: z.string().min(1).max(1_024).optional(),
  force: z.boolean().optional(),
  /** After the run, delete the documents of the `file://` folders given that are no longer there (as `shoal ingest --prune`). */
  prune: z.boolean().optional(),
  job_id: JobId.optional(),
});

/**
 * `?wait=true`: answer once the run is over (200 with its final status), or 202 as without it when
 * the gateway's request timeout comes first (ingest-wait.ts).
 */
export const IngestQuery = z.strictObject({ wait: z.enum(['true', 'false']).optional() });

/** A definition object from a request: its mistakes are the caller's (422), not the gateway's configuration. */
function requestDefinition(pipeline: Record<string, unknown>): PipelineDefinition {
  try {
    return parseDefinition(pipeline, 'of the request');
  } catch (error) {
    if (isShoalError(error) && error.code === ErrorCode.CONFIG_INVALID) throw new ShoalError(ErrorCode.INVALID_INPUT, error.message, { details: { field: 'pipeline' } });
    throw error;
  }
}

async function definitionOf(pipeline: string | Record<string, unknown> | undefined): Promise<PipelineDefinition> {
  if (pipeline === undefined || typeof pipeline !== 'string') return pipeline === undefined ? resolvePipeline(undefined) : requestDefinition(pipeline);
  // Only built-in names: a string from a request must never become a file read.
  if (!builtinPipelineNames().includes(pipeline)) {
    throw new ShoalError(ErrorCode.INVALID_INPUT, `pipeline ${JSON.stringify(pipeline.slice(0, 128))} is not a built-in (${builtinPipelineNames().join(', ')}); send a definition object instead`);
  }
  return resolvePipeline(pipeline);
}

/**
 * Every model the run will name reaches the workers as a model name, so a path (`../x`, `/etc/x`)
 * is refused here as on the other routes (422), before a run is started and fails on it.
 */
function checkModelNames(definition: PipelineDefinition): void {
  const { parse, encode, extract, classify } = definition.stages;
  for (const model of [parse.ocrModel, encode.model, encode.sparse?.model, encode.multivector?.model, extract?.model, classify?.model]) {
    if (model !== undefined) checkRemoteModelName(model);
  }
}

/** The encode (and extract, and a non-built-in OCR) models of the run must be served by some worker, for that operation. */
async function checkServedModels(context: RouteContext, definition: PipelineDefinition): Promise<void> {
  const jobs = context.deps.jobs;
  // Ingest runs need the jobs of NATS JetStream: a gateway without them has none to start.
  if (jobs === null) throw new ShoalError(ErrorCode.UNAVAILABLE, 'document ingest needs NATS JetStream and parse workers, and this gateway runs without them');
  const check = (primitive: 'encode' | 'extract', model: string): Promise<void> => jobs.checkModel(primitive, model);
  const { parse, encode, extract } = definition.stages;
  // The OCR model runs in the parse workers' own engine, which loads (and downloads from the hub)
  // whatever id it is given: only a built-in one, or one some worker serves for extract.
  if (!builtinModelIds().includes(parse.ocrModel)) await check('extract', parse.ocrModel);
  await check('encode', encode.model);
  if (encode.sparse !== undefined) await check('encode', encode.sparse.model);
  if (encode.multivector !== undefined) await check('encode', encode.multivector.model);
  if (extract !== undefined) await check('extract', extract.model);
}

/**
 * SHOAL_DOCUMENT_JOBS: the request becomes document jobs, which name a pipeline and an index and
 * nothing else; what a job cannot carry is refused (422) with the way to get it. A pipeline this
 * gateway can resolve (built-in, or its SHOAL_PIPELINES) has its models checked as a coordinated
 * run's are; another name is the workers' to resolve (an unknown one fails each document, NOT_FOUND).
 */
async function startAsJobs(context: RouteContext, ingest: IngestApi, body: z.output<typeof IngestBody>): Promise<IngestRunStatus> {
  if (ingest.startJobs === undefined) throw new ShoalError(ErrorCode.UNAVAILABLE, 'this gateway cannot publish document jobs');
  const carried: [string, unknown][] = [['model', body.model], ['force', body.force], ['prune', body.prune]];
  for (const [field, value] of carried) {
    if (value !== undefined && value !== false) throw new ShoalError(ErrorCode.INVALID_INPUT, `"${field}" cannot travel with a document job (it names a pipeline and an index, nothing else): put it in a pipeline file of the workers' SHOAL_PIPELINES and name that pipeline`, { details: { field } });
  }
  const pipeline = body.pipeline ?? 'documents';
  if (typeof pipeline !== 'string' || !RESOURCE_NAME.test(pipeline)) {
    throw new ShoalError(ErrorCode.INVALID_INPUT, 'with document jobs, "pipeline" is a name the workers resolve (built-in, or NAME.yaml in SHOAL_PIPELINES), not a definition object', { details: { field: 'pipeline' } });
  }
  const known = await pipelineByName(pipeline, context.settings.pipelinesDir ?? null).catch(() => null);
  if (known !== null) {
    checkModelNames(known);
    await checkServedModels(context, known);
  }
  await checkJobIdFree(context, body.job_id, 'ingest');
  return ingest.startJobs({ job_id: body.job_id, pipeline, index: body.index, records: body.sources });
}

function ingestOrUnavailable(ingest: IngestApi | null | undefined): IngestApi {
  if (ingest === null || ingest === undefined) throw new ShoalError(ErrorCode.UNAVAILABLE, 'document ingest needs NATS JetStream and parse workers, and this gateway runs without them');
  return ingest;
}

export function registerIngestRoutes(app: FastifyInstance, context: RouteContext): void {
  // The multipart parser in a scope of its own: every other route keeps refusing multipart (415).
  app.register(async (scope) => {
    await scope.register(multipart);
    scope.post('/v1/ingest', { config: { upload: true } }, async (request, reply) => {
      context.metrics.track(request, { primitive: 'job', model: OTHER_MODEL, lane: 'bulk' });
      const { wait } = parseWith(IngestQuery, request.query ?? {}, 'ingest query string');
      const raw = isUpload(request) ? await uploadedBody(request, reply, context, ingestOrUnavailable(context.deps.ingest)) : request.body;
      const body = parseWith(IngestBody, raw, 'ingest request');
      const target = indexTarget(context.settings.indexes, body.index);
      const ids = new Set<string>();
      for (const source of body.sources) {
        const id = source.id ?? ('ref' in source ? source.ref : '');
        if (ids.has(id)) throw new ShoalError(ErrorCode.INVALID_INPUT, `duplicate source ${JSON.stringify(id.slice(0, 200))}`);
        ids.add(id);
      }
      const ingest = ingestOrUnavailable(context.deps.ingest);
      if (context.settings.documentJobs === true) {
        const started = await context.call(reply)(() => startAsJobs(context, ingest, body));
        const status = wait === 'true' ? await waitForRun(ingest, started, reply, context.settings.requestTimeoutMs) : started;
        const location = `/v1/jobs/${status.job_id}`;
        return reply.code(isFinishedRun(status) && wait === 'true' ? 200 : 202).header('location', location).send({ job_id: status.job_id, status: publicIngestStatus(status), links: { self: location } });
      }
      const definition = applyOverrides(await definitionOf(body.pipeline), { model: body.model, index: body.index });
      checkModelNames(definition);
      await context.call(reply)(() => checkJobIdFree(context, body.job_id, 'ingest'));
      // A run whose models no worker serves would be accepted and fail later: refused now, as a job is.
      await context.call(reply)(() => checkServedModels(context, definition));
      const started = await context.call(reply)(() =>
        ingest.start({ job_id: body.job_id, definition, index: { name: body.index, target }, records: body.sources, force: body.force === true, prune: body.prune === true }),
      );
      const status = wait === 'true' ? await waitForRun(ingest, started, reply, context.settings.requestTimeoutMs) : started;
      const location = `/v1/jobs/${status.job_id}`;
      return reply.code(isFinishedRun(status) && wait === 'true' ? 200 : 202).header('location', location).send({ job_id: status.job_id, status: publicIngestStatus(status), links: { self: location } });
    });
  });
}
