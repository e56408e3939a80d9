import { jetstream } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import type { DocumentJob } from '../../adapters/protocol/documents.js';
import { DocumentProducer, type FollowedRun } from '../../pipelines/documents/document-producer.js';

/**
 * Publishes one document job under the `shoal` prefix as any client would (the wire message, not
 * the producer's own publish), announces its run of one and follows it to its end.
 */
export async function runOneDocument(nc: NatsConnection, job: { runId: string; doc: string; source: DocumentJob['source']; pipeline: string; index: string }, timeoutMs: number): Promise<FollowedRun> {
  const producer = await DocumentProducer.open(nc);
  try {
    const message: DocumentJob = { v: 1, run_id: job.runId, doc: job.doc, source: job.source, pipeline: job.pipeline, index: job.index, submitted_at: new Date().toISOString() };
    await jetstream(nc).publish(`shoal.documents.${job.pipeline}`, JSON.stringify(message));
    await producer.announce(job.runId, 1, job.pipeline, job.index);
    return await producer.follow(job.runId, { signal: AbortSignal.timeout(timeoutMs) });
  } finally {
    producer.close();
  }
}
