import { createHash, type Hash } from 'node:crypto';
import { ErrorCode, ShoalError } from '../../protocol/errors.js';
import type { JobStatus, ResultTarget } from '../../protocol/jobs.js';
import type { Primitive } from '../../protocol/subjects.js';

/**
 * What makes a job id name one job: the hash of everything a submission decides (primitive,
 * the validated request, where results go, items per part). The jobs client stores it in the
 * status at creation (compare-and-set create: the first submission wins) and compares it on
 * every resubmission of the id: same hash → the same job (idempotent retry), another hash →
 * JOB_CONFLICT, so two different jobs can never share parts, counters or results.
 */

export interface JobContent {
  primitive: Primitive;
  /** The request after validation (zod output), so `"a"` and `{text: "a"}` hash the same. */
  request: unknown;
  result: ResultTarget;
  partItems: number;
}

/** Feeds `value` into the hash as canonical JSON: object keys sorted, so key order never matters. */
function feed(hash: Hash, value: unknown): void {
  if (value === null || typeof value !== 'object') {
    hash.update(JSON.stringify(value) ?? 'null');
    return;
  }
  if (Array.isArray(value)) {
    hash.update('[');
    value.forEach((item, i) => {
      if (i > 0) hash.update(',');
      feed(hash, item);
    });
    hash.update(']');
    return;
  }
  if (value instanceof Uint8Array) {
    hash.update('b:');
    hash.update(value);
    return;
  }
  hash.update('{');
  const keys = Object.keys(value).filter((key) => (value as Record<string, unknown>)[key] !== undefined).sort();
  keys.forEach((key, i) => {
    if (i > 0) hash.update(',');
    hash.update(JSON.stringify(key));
    hash.update(':');
    feed(hash, (value as Record<string, unknown>)[key]);
  });
  hash.update('}');
}

export function jobContentHash(content: JobContent): string {
  return canonicalHash({ primitive: content.primitive, request: content.request, result: content.result, part_items: content.partItems });
}

/** SHA-256 of `value` as canonical JSON (also an ingest run's content identity, pipelines/documents/nats-ingest.ts). */
export function canonicalHash(value: unknown): string {
  const hash = createHash('sha256');
  feed(hash, value);
  return hash.digest('hex');
}

/** What the stored status says the job is, against what was submitted now. */
export interface SubmittedShape {
  primitive: Primitive;
  model: string;
  parts: number;
  items: number;
  contentHash: string;
}

/**
 * Throws JOB_CONFLICT when `existing` is not the job just submitted. A status without a hash
 * (written before hashes existed, or recreated by a worker from a part) is compared by shape.
 */
export function checkSameJob(existing: JobStatus, submitted: SubmittedShape): void {
  const differs =
    existing.content_hash !== undefined
      ? existing.content_hash !== submitted.contentHash
      : existing.primitive !== submitted.primitive ||
        existing.model !== submitted.model ||
        existing.parts !== submitted.parts ||
        existing.items !== submitted.items;
  if (!differs) return;
  throw new ShoalError(
    ErrorCode.JOB_CONFLICT,
    `job id "${existing.job_id}" is already used by a different job (${existing.primitive} on "${existing.model}", ${existing.items} items, created ${existing.created_at}); resubmit the identical job to retry it, or choose another job id`,
    { details: { job_id: existing.job_id, state: existing.state } },
  );
}
