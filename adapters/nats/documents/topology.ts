import { AckPolicy, DeliverPolicy, DiscardPolicy, RetentionPolicy, StorageType, type JetStreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { documentNames, type DocumentNames } from '../../protocol/documents.js';
import { JS_CODES, isJsApiCode, toNatsShoalError } from '../connection/nats-errors.js';
import { STREAM_BYTES_FLOOR, createAutoSized } from '../connection/stream-sizing.js';
import { ensureIngestTopology, type IngestNames } from '../ingest/ingest-store.js';
import type { Topology } from '../connection/topology.js';

/**
 * What document jobs add to the NATS topology (docs/nats.md, "Document jobs"):
 * - `<P>_DOCUMENTS`: a work-queue stream of document jobs, `<prefix>.documents.<pipeline-token>`,
 *   one durable pull consumer per pipeline (`<p>_documents_<token>`) shared by every document
 *   worker serving it: the consumer KEDA scales the documents pool on;
 * - `<P>_RUNS`: a work-queue stream of run announcements (`<prefix>.runs.open`), consumer
 *   `<p>_runs`, so an announcement published while no worker runs waits for one;
 * - `<P>_EVENTS`: a limits stream (7 days) of terminal events, `<prefix>.events.>`, whose
 *   duplicate window (the topology's) stores a repeated event once;
 * - the ingest KV bucket (`<p>_ingest`, shared with the parse tasks) for the per-document ledger
 *   and the run status.
 * Producers may create all of it; only workers set their consumers' ack wait and deliveries.
 */

const SECOND_NS = 1_000_000_000;
/** The document queue and the events are small records: a share of the store like the parse stream's, capped lower. */
const DOCUMENTS_CEILING = 1024 ** 3;
const EVENTS_CEILING = 1024 ** 3;

export interface DocumentConsumerSettings {
  /** Time a worker has to finish a document before it is redelivered (working() extends it). @default 60000 */
  ackWaitMs?: number;
}

export interface DocumentTopology {
  names: DocumentNames;
  ingest: IngestNames;
}

async function ensureStream(jsm: JetStreamManager, spec: Parameters<typeof createAutoSized>[1], ceiling: number): Promise<void> {
  try {
    await jsm.streams.info(spec.name);
    return;
  } catch (error) {
    if (!isJsApiCode(error, JS_CODES.StreamNotFound)) throw error;
  }
  await createAutoSized(jsm, spec, { shares: 1, ceiling, streams: [spec.name] });
}

async function ensureConsumer(jsm: JetStreamManager, stream: string, durable: string, filter: string, ackWaitMs: number | undefined): Promise<void> {
  const wanted = (ackWaitMs ?? 60_000) * 1_000_000;
  try {
    const info = await jsm.consumers.info(stream, durable);
    if (ackWaitMs !== undefined && info.config.ack_wait !== wanted) await jsm.consumers.update(stream, durable, { ack_wait: wanted });
    return;
  } catch (error) {
    if (!isJsApiCode(error, JS_CODES.ConsumerNotFound)) throw error;
  }
  // Unlimited deliveries on the server: the worker ends a document that keeps failing itself
  // (a failed event and a dead letter), which the server's max_deliver could not do.
  await jsm.consumers.add(stream, {
    durable_name: durable,
    filter_subject: filter,
    ack_policy: AckPolicy.Explicit,
    deliver_policy: DeliverPolicy.All,
    ack_wait: wanted,
    max_deliver: -1,
    max_ack_pending: 10_000,
  });
}

/**
 * Creates (idempotently) the document streams, the consumers of `pipelines` and of run
 * announcements, and the ingest KV bucket. `consumer` given (a worker): existing consumers take
 * its ack wait; left out (a producer): they are kept as the workers set them.
 */
export async function ensureDocumentTopology(nc: NatsConnection, topology: Topology, pipelines: readonly string[], consumer?: DocumentConsumerSettings): Promise<DocumentTopology> {
  const names = documentNames(topology.names);
  const { settings, jsm } = topology;
  const storage = settings.storage === 'file' ? StorageType.File : StorageType.Memory;
  const common = { storage, num_replicas: settings.replicas, duplicate_window: settings.duplicateWindowSeconds * SECOND_NS };
  try {
    await ensureStream(jsm, { ...common, name: names.stream, subjects: [names.allSubjects()], retention: RetentionPolicy.Workqueue, discard: DiscardPolicy.New, max_age: settings.jobsMaxAgeSeconds * SECOND_NS }, DOCUMENTS_CEILING);
    await ensureStream(jsm, { ...common, name: names.runsStream, subjects: [`${topology.names.prefix}.runs.>`], retention: RetentionPolicy.Workqueue, discard: DiscardPolicy.New, max_age: settings.jobsMaxAgeSeconds * SECOND_NS }, STREAM_BYTES_FLOOR);
    await ensureStream(jsm, { ...common, name: names.eventsStream, subjects: [names.allEvents()], retention: RetentionPolicy.Limits, discard: DiscardPolicy.Old, max_age: settings.statusMaxAgeSeconds * SECOND_NS }, EVENTS_CEILING);
    for (const pipeline of pipelines) await ensureConsumer(jsm, names.stream, names.consumer(pipeline), names.subject(pipeline), consumer?.ackWaitMs);
    await ensureConsumer(jsm, names.runsStream, names.runsConsumer, names.runsOpen, consumer?.ackWaitMs);
  } catch (error) {
    throw toNatsShoalError(error, 'set up the NATS document-job topology');
  }
  const ingest = await ensureIngestTopology(nc, topology);
  return { names, ingest };
}
