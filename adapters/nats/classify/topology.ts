import { AckPolicy, DeliverPolicy, DiscardPolicy, RetentionPolicy, StorageType, type JetStreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { classifyJobNames, type ClassifyJobNames } from '../../protocol/classify-jobs.js';
import { ensureIngestTopology, type IngestNames } from '../ingest/ingest-store.js';
import { JS_CODES, isJsApiCode, toNatsShoalError } from '../connection/nats-errors.js';
import { createAutoSized } from '../connection/stream-sizing.js';
import type { Topology } from '../connection/topology.js';

/**
 * What classification jobs add to the NATS topology (docs/nats.md, "Classification jobs"):
 * - `<P>_CLASSIFY`: a work-queue stream of chunk and end messages (`<prefix>.classify.>`), with
 *   one durable pull consumer `<p>_classify` shared by every classify worker: the consumer KEDA
 *   scales the classify pool on;
 * - the ingest KV bucket (`<p>_ingest`) for the runs' status (`classify.<run>`), as document jobs
 *   keep theirs there;
 * - the payload object store (the jobs topology's) for specs, large chunks, chunk results, the
 *   assembled results and the category matrices (`classify/...`).
 * Producers may create all of it; only workers set the consumer's ack wait.
 */

const SECOND_NS = 1_000_000_000;
/** Chunk messages are up to a few hundred KiB each: a share of the store like the documents stream's. */
const CLASSIFY_CEILING = 1024 ** 3;

export interface ClassifyConsumerSettings {
  /** Time a worker has to finish a chunk before it is redelivered (working() extends it). @default 60000 */
  ackWaitMs?: number;
}

export interface ClassifyTopology {
  names: ClassifyJobNames;
  ingest: IngestNames;
}

async function ensureConsumer(jsm: JetStreamManager, names: ClassifyJobNames, ackWaitMs: number | undefined): Promise<void> {
  const wanted = (ackWaitMs ?? 60_000) * 1_000_000;
  try {
    const info = await jsm.consumers.info(names.stream, names.consumer);
    if (ackWaitMs !== undefined && info.config.ack_wait !== wanted) await jsm.consumers.update(names.stream, names.consumer, { ack_wait: wanted });
    return;
  } catch (error) {
    if (!isJsApiCode(error, JS_CODES.ConsumerNotFound)) throw error;
  }
  // Unlimited deliveries on the server: a worker fails a chunk that never finishes itself (the run
  // failed with TIMEOUT and a dead letter), which the server's max_deliver could not do.
  await jsm.consumers.add(names.stream, {
    durable_name: names.consumer,
    filter_subject: names.allSubjects(),
    ack_policy: AckPolicy.Explicit,
    deliver_policy: DeliverPolicy.All,
    ack_wait: wanted,
    max_deliver: -1,
    max_ack_pending: 10_000,
  });
}

/**
 * Creates (idempotently) the classify stream, its consumer and the ingest KV bucket. `consumer`
 * given (a worker): an existing consumer takes its ack wait; left out (a producer): kept as the
 * workers set it.
 */
export async function ensureClassifyTopology(nc: NatsConnection, topology: Topology, consumer?: ClassifyConsumerSettings): Promise<ClassifyTopology> {
  const names = classifyJobNames(topology.names);
  const { settings, jsm } = topology;
  const storage = settings.storage === 'file' ? StorageType.File : StorageType.Memory;
  try {
    try {
      await jsm.streams.info(names.stream);
    } catch (error) {
      if (!isJsApiCode(error, JS_CODES.StreamNotFound)) throw error;
      await createAutoSized(
        jsm,
        {
          name: names.stream,
          subjects: [names.allSubjects()],
          retention: RetentionPolicy.Workqueue,
          discard: DiscardPolicy.New,
          storage,
          num_replicas: settings.replicas,
          duplicate_window: settings.duplicateWindowSeconds * SECOND_NS,
          max_age: settings.jobsMaxAgeSeconds * SECOND_NS,
        },
        { shares: 1, ceiling: CLASSIFY_CEILING, streams: [names.stream] },
      );
    }
    await ensureConsumer(jsm, names, consumer?.ackWaitMs);
  } catch (error) {
    throw toNatsShoalError(error, 'set up the NATS classification-job topology');
  }
  const ingest = await ensureIngestTopology(nc, topology);
  return { names, ingest };
}
