import type { FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { ErrorCode, ShoalError } from '../../../adapters/protocol/errors.js';
import { parseWith } from '../../../adapters/protocol/validate.js';
import type { IngestApi, RouteContext } from '../context.js';
import { indexTarget } from '../index-stores.js';
import { readUpload } from '../ingest-upload.js';

/**
 * The multipart form of POST /v1/ingest turned into the JSON body the route validates: the form's
 * text fields as the JSON fields (`force`/`prune` as `true`/`false`, `pipeline` a built-in name or
 * a definition as JSON, `sources` a JSON array of more sources), and each file as a source
 * `{"id": <file name>, "ref": "obj://<p>_payloads/uploads/<sha256>"}` once staged (ingest-upload.ts).
 * Named by content, a file uploaded again is the same object, so a `job_id` resubmitted with the
 * same files is the same run.
 */

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The route takes a multipart/form-data upload (POST /v1/ingest). */
    upload?: boolean;
  }
}

const Flag = z.enum(['true', 'false']).transform((value) => value === 'true');
const JsonText = z.string().transform((text, context) => {
  try {
    return JSON.parse(text) as unknown;
  } catch (error) {
    context.addIssue({ code: 'custom', message: `not valid JSON: ${error instanceof Error ? error.message : String(error)}` });
    return z.NEVER;
  }
});

export const UploadFields = z.strictObject({
  index: z.string(),
  model: z.string().optional(),
  /** A built-in name, or a definition object as JSON (`{...}`). */
  pipeline: z.string().optional(),
  force: Flag.optional(),
  prune: Flag.optional(),
  job_id: z.string().optional(),
  sources: JsonText.optional(),
});

/** Whether a request is a multipart upload (the route's only non-JSON body). */
export function isUpload(request: FastifyRequest): boolean {
  return /^multipart\/form-data\b/i.test(request.headers['content-type'] ?? '');
}

/** The upload as the route's JSON body: fields checked, index known, files staged. */
export async function uploadedBody(request: FastifyRequest, reply: FastifyReply, context: RouteContext, ingest: IngestApi): Promise<unknown> {
  const stage = ingest.stage?.bind(ingest);
  if (stage === undefined) throw new ShoalError(ErrorCode.UNAVAILABLE, 'this gateway cannot store uploads: send the documents by reference or as inline text');
  const upload = await readUpload(request);
  try {
    const fields = parseWith(UploadFields, upload.fields, 'ingest upload fields');
    // An unknown index is refused before anything is stored.
    indexTarget(context.settings.indexes, fields.index);
    const { sources, pipeline, ...rest } = fields;
    const staged: Array<{ id: string; ref: string }> = [];
    // One at a time: each streams its temp file into the object store.
    for (const file of upload.files) staged.push({ id: file.name, ref: await context.call(reply)(() => stage(`uploads/${file.sha256}`, file.path)) });
    return {
      ...rest,
      ...(pipeline === undefined ? {} : { pipeline: pipeline.trimStart().startsWith('{') ? parseWith(JsonText, pipeline, 'pipeline field') : pipeline }),
      // A `sources` that is not an array reaches the body's schema as it is, which names the mistake.
      sources: Array.isArray(sources) ? [...sources, ...staged] : (sources ?? staged),
    };
  } finally {
    await upload.dispose();
  }
}
