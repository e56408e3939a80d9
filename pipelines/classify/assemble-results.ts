import type { ClassifyJobNames, ClassifyJobRecord } from '../../adapters/protocol/classify-jobs.js';
import { ErrorCode, ShoalError } from '../../adapters/protocol/errors.js';
import type { PayloadStore } from '../../adapters/nats/connection/payloads.js';
import { withNatsRetry } from '../../adapters/nats/connection/nats-retry.js';

/**
 * The last step of a classification run: the chunks' JSON Lines (`classify/<run>/chunk-<n>.jsonl`
 * in the payload bucket, written by whichever worker classified each) concatenated in chunk
 * order, so the results are in catalog order, and streamed to the run's result target one chunk
 * at a time (memory holds one chunk, not the catalog). The target is written atomically (the NATS
 * object store, an S3 multipart upload, a file renamed into place), and its content depends only
 * on the chunks, so assembling again after a kill writes the same bytes.
 */

export interface AssembleOptions {
  payloads: PayloadStore;
  names: ClassifyJobNames;
  signal?: AbortSignal;
}

function chunkRef(options: AssembleOptions, runId: string, chunk: number): string {
  return `obj://${options.payloads.bucket}/${options.names.chunkObject(runId, chunk)}`;
}

async function* chunkLines(options: AssembleOptions, record: ClassifyJobRecord, chunks: number): AsyncGenerator<Uint8Array> {
  for (let chunk = 0; chunk < chunks; chunk++) {
    if (options.signal?.aborted === true) throw new ShoalError(ErrorCode.CANCELLED, `assembling run ${record.job_id}: cancelled`);
    const ref = chunkRef(options, record.job_id, chunk);
    yield await withNatsRetry(`read ${ref}`, () => options.payloads.get(ref));
  }
}

/** Writes the run's results to its target; returns the target's reference. */
export async function assembleResults(options: AssembleOptions, record: ClassifyJobRecord): Promise<string> {
  const chunks = record.chunks;
  if (chunks === null) throw new ShoalError(ErrorCode.INTERNAL, `run ${record.job_id} is assembled before its number of chunks is known`);
  return withNatsRetry(`write the results of run ${record.job_id} to ${record.result}`, () => options.payloads.writeStream(record.result, chunkLines(options, record, chunks)));
}

/** The chunks' objects (and those of chunks sent by reference), removed once the results are written: best effort, the bucket's max age removes what is left. */
export async function removeChunkObjects(options: AssembleOptions, record: ClassifyJobRecord): Promise<void> {
  const chunks = record.chunks ?? 0;
  for (let chunk = 0; chunk < chunks; chunk++) {
    await options.payloads.remove(chunkRef(options, record.job_id, chunk)).catch(() => undefined);
    await options.payloads.remove(`obj://${options.payloads.bucket}/${options.names.itemsObject(record.job_id, chunk)}`).catch(() => undefined);
  }
}
